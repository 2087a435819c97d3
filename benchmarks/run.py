"""Benchmark tinytorch against PyTorch on the CPU: `python -m benchmarks.run [--quick] ...`.

Every measurement runs in a process of its own (`benchmarks.child`), so neither library's BLAS
threads compete with the other's. A round runs every (library, thread setting) pair once,
alternating tinytorch and torch (the order reversed every other round); each row is repeated for
several rounds and reported as the median over processes with its min-max spread, for each
library at its fastest setting: 1 or 2 threads, and for training also 2 data-parallel threads
(tinytorch: module 18's DataParallel, as the GPT milestone trains; PyTorch: the same split).
The order and the statistics are module 19's harness (`schedule`, and `summarize`, which adds a
bootstrap interval of the median).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.common import (
    CONV,
    DATA_PARALLEL,
    OWN_LOOP,
    PLAIN,
    ROOT,
    SPLIT,
    THREAD_CHOICES,
    WITH_PLAIN,
    Row,
    summary,
)
from tinytorch.bench.harness import schedule

_PLAIN = {"libraries": WITH_PLAIN}  # the row also measures the plain lesson code
# the own loop also measures the plain lessons with accelerate's batch split alone (parts=())
_OWN = {"libraries": (*WITH_PLAIN, SPLIT), "settings": (OWN_LOOP,)}
_FLOOR = {"settings": ("1t",)}
FULL = [
    (Row("train_small", "train", "small", batch=16, seq_len=64, steps=5, warmup=2, **_PLAIN), 5),
    (Row("train_medium", "train", "medium", batch=16, seq_len=128, steps=3, warmup=1, **_PLAIN), 5),
    # a user's own loop at default threads (model(x), loss.backward(), opt.step(); no settings)
    (Row("train_small_own", "train", "small", batch=16, seq_len=64, steps=5, warmup=2, **_OWN), 5),
    (
        Row(
            "train_medium_own", "train", "medium", batch=16, seq_len=128, steps=3, warmup=1, **_OWN
        ),
        5,
    ),  # fmt: skip
    # the floor under the own loop: one core's half batch (B8) of dense products, one thread
    (Row("gemm_small", "gemm", "small", batch=8, seq_len=64, steps=5, warmup=2, **_FLOOR), 5),
    (Row("gemm_medium", "gemm", "medium", batch=8, seq_len=128, steps=3, warmup=1, **_FLOOR), 5),
    (Row("gen_small", "generate", "small", new_tokens=200, steps=3, warmup=1, **_PLAIN), 5),
    (Row("gen_medium", "generate", "medium", new_tokens=200, steps=2, warmup=1, **_PLAIN), 5),
    # the plain lesson code without module 17's cache: every token recomputes the whole prefix
    (
        Row(
            "gen_small_uncached",
            "generate",
            "small",
            new_tokens=200,
            steps=2,
            warmup=1,
            libraries=(PLAIN,),
            cache=False,
        ),
        3,
    ),  # fmt: skip
    (Row("gpt2", "gpt2", "gpt2-small", seq_len=256, new_tokens=32, steps=3, warmup=1), 3),
    # module 21's Llama at the small preset's sizes (2 kv heads), against a PyTorch Llama
    (Row("llama_train_small", "train", "small", batch=16, seq_len=64, arch="llama", **_PLAIN), 5),
    (
        Row(
            "llama_gen_small",
            "generate",
            "small",
            new_tokens=200,
            steps=3,
            warmup=1,
            arch="llama",
            **_PLAIN,
        ),
        5,
    ),  # fmt: skip
    # one Conv2d layer, forward and backward: LeNet-5's second convolution (6 -> 16 channels,
    # 14x14, 5x5) on a batch of 64, and a VGG-style 3x3 layer (64 -> 128 channels, 32x32)
    (Row("conv_lenet", CONV, CONV, batch=64, conv=(6, 16, 14, 14, 5, 1, 0), steps=10), 5),
    (Row("conv_large", CONV, CONV, batch=16, conv=(64, 128, 32, 32, 3, 1, 1), steps=3), 5),
]
QUICK = [
    (Row("train_small", "train", "small", batch=16, seq_len=64, steps=3, warmup=1), 1),
    (
        Row(
            "train_small_own",
            "train",
            "small",
            batch=16,
            seq_len=64,
            steps=3,
            warmup=1,
            settings=(OWN_LOOP,),
        ),
        1,
    ),  # fmt: skip
    (Row("gen_small", "generate", "small", new_tokens=50, steps=2, warmup=1), 1),
]
QUICK_THREADS = ("1t",)  # --quick: one thread only, four processes in all
# metric -> True when larger is better
METRICS = {"step_ms": False, "tok_s": True, "forward_ms": False, "peak_mib": False}
CPU_TWIN = {"step_ms": "step_cpu_ms", "tok_s": "tok_s_cpu", "forward_ms": "forward_cpu_ms"}


def child(library: str, setting: str, row: Row) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.child", library, setting, json.dumps(asdict(row))]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child {library} {row.key} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def settings(row: Row, threads: tuple) -> tuple:
    """The plan's thread settings, plus data-parallel training (both libraries) with 2 threads;
    a row that names its own settings (the user's loop, OWN_LOOP) gets those."""
    if row.settings:
        return tuple(row.settings)
    extra = row.kind == "train" and "2t" in threads
    return (*threads, DATA_PARALLEL) if extra else tuple(threads)


def measure(row: Row, rounds: int, threads: tuple = THREAD_CHOICES) -> dict:
    """Per library and thread setting, a summary of each metric over `rounds` processes."""
    plan = settings(row, threads)
    libraries = tuple(row.libraries)
    raw: dict = {(lib, s): [] for lib in libraries for s in plan}
    pairs = [(lib, s) for s in plan for lib in libraries]
    for lib, s in schedule(pairs, rounds):  # module 19: each round in the other order
        raw[lib, s].append(child(lib, s, row))
    out: dict = {"row": asdict(row), "rounds": rounds, "libraries": {}}
    for lib in libraries:
        by_setting = {
            s: {m: summary([res[m] for res in raw[lib, s]]) for m in raw[lib, s][0]} for s in plan
        }
        best = {}
        for metric in raw[lib, plan[0]][0]:
            if metric not in METRICS or metric == "peak_mib":
                continue
            pick = max if METRICS[metric] else min
            s = pick(plan, key=lambda s: by_setting[s][metric]["median"])
            best[metric] = {"setting": s, **by_setting[s][metric]}
            if CPU_TWIN[metric] in by_setting[s]:  # CPU time of the same processes
                best[metric]["cpu"] = by_setting[s][CPU_TWIN[metric]]
        # memory from the processes at the setting of the row's first timed metric
        first = next(iter(best.values()))["setting"]
        best["peak_mib"] = {"setting": first, **by_setting[first]["peak_mib"]}
        out["libraries"][lib] = {"best": best, "by_setting": by_setting}
    return out


def machine() -> dict:
    """CPU, Python, numpy's BLAS and torch's, each read in a child of its own library."""
    probe = (
        "import json, numpy; from benchmarks.common import blas_info, torch_info; print(json.dumps("
        "{'numpy': numpy.__version__, 'blas': blas_info(), 'torch': torch_info()}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    info = json.loads(done.stdout)
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        found = re.search(r"model name\s*:\s*(.*)", cpuinfo.read_text())
        cpu = found.group(1) if found else cpu
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), **info}


def run(rows: list[tuple[Row, int]], say, threads: tuple = THREAD_CHOICES) -> dict:
    results: dict = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_before": os.getloadavg(),
        "rows": {},
    }
    for row, rounds in rows:
        count = len(row.libraries) * len(settings(row, threads))
        say(f"{row.key}: {rounds} round(s) x {count} processes")
        results["rows"][row.key] = measure(row, rounds, threads)
    results["load_after"] = os.getloadavg()
    return results


def main(argv: list[str] | None = None, console=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small rows, one round (< 1 minute)")
    parser.add_argument(
        "--config",
        choices=["small", "medium", "gpt2-small", CONV, "all"],
        default=None,
        help="only the rows of one model size, or conv: only the convolution rows",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--quality", action="store_true", help="also the 2,000-step quality run")
    parser.add_argument("--quality-steps", type=int, default=2000)
    args = parser.parse_args(argv)
    return benchmark(
        args.config, args.quick, args.out, args.quality_steps if args.quality else 0, console
    )


def benchmark(
    config: str | None, quick: bool, out: Path | None, quality_steps: int, console=None
) -> dict:
    """Run, print the table, the BLAS in use and the load, and write JSON; returns the results."""
    from rich.console import Console

    from benchmarks.report import NOTES, table

    console = console or Console(highlight=False)
    say = lambda line: console.print(f"[dim]{line}[/dim]")  # noqa: E731
    plan = QUICK if quick else FULL
    if config and config != "all":
        plan = [(row, n) for row, n in plan if row.preset == config]
    began = time.perf_counter()
    results = run(plan, say, QUICK_THREADS if quick else THREAD_CHOICES)
    results["quick"] = quick
    if quality_steps:
        from benchmarks.quality import quality_run

        say(f"quality: small preset, {quality_steps} steps each (this takes a while)")
        results["quality"] = quality_run(quality_steps)
    results["seconds"] = time.perf_counter() - began
    console.print(table(results, console.width))
    for note in NOTES:
        console.print(f"[dim]{note}[/dim]")
    m = results["machine"]
    console.print(
        f"numpy BLAS: {m['blas']['internal_api']} {m['blas']['version']}, kernel "
        f"{m['blas']['kernel']}; OPENBLAS_CORETYPE {m['blas']['OPENBLAS_CORETYPE']}; torch "
        f"{m['torch']['version']} BLAS {m['torch']['blas']}, CPU capability "
        f"{m['torch']['cpu_capability']}; CPU: {m['cpu']} x{m['cores']}; load average "
        f"{results['load_before'][0]:.1f} -> {results['load_after'][0]:.1f}"
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        console.print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()
