"""Benchmark tinytorch against PyTorch on the CPU: `python -m benchmarks.run [--quick] ...`."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import time
from pathlib import Path

from benchmarks.common import CONFIGS, NEW_TOKENS, blas_info, limit_threads

# (warm-up steps, timed repetitions, generated tokens, generation repetitions, memory steps)
PLANS = {"quick": (5, 5, 32, 1, 2), "full": (5, 10, NEW_TOKENS, 3, 5)}


def machine() -> dict:
    import numpy as np
    import torch

    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        found = re.search(r"model name\s*:\s*(.*)", cpuinfo.read_text())
        model = found.group(1) if found else model
    torch_blas = re.findall(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "torch": torch.__version__,
            "torch_blas": torch_blas[0] if torch_blas else "unknown",
            "numpy_blas": blas_info()}  # fmt: skip


def run(configs: list[str], quick: bool, quality_steps: int, say) -> dict:
    """Every measurement; `say` prints progress lines."""
    from benchmarks.memory import peak_memory
    from benchmarks.speed import forward_and_train, generation

    warmup, reps, new_tokens, gen_reps, mem_steps = PLANS["quick" if quick else "full"]
    results: dict = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                     "machine": machine(), "quick": quick, "load_before": os.getloadavg(),
                     "configs": {}}  # fmt: skip
    for name in configs:
        cfg = CONFIGS[name]
        say(f"{name}: forward and training step ({warmup} warm-up, {reps} timed, interleaved)")
        r = results["configs"][name] = {"config": vars(cfg)}
        r.update(forward_and_train(cfg, warmup, reps))
        say(f"{name}: generation, {new_tokens} tokens, {gen_reps} repetition(s)")
        r["generation"] = generation(cfg, new_tokens, gen_reps)
        say(f"{name}: peak memory of {mem_steps} training steps (child processes)")
        r["memory"] = peak_memory(name, mem_steps)
    if quality_steps:
        from benchmarks.quality import quality_run

        say(f"quality: small config, {quality_steps} steps each (this takes a while)")
        results["quality"] = quality_run(
            quality_steps,
            progress=lambda row, s: say(
                f"  step {row['step']}: val {row['tinytorch']:.3f} / "
                f"{row['torch']:.3f}  ({s['tinytorch']:.0f} s / "
                f"{s['torch']:.0f} s)"
            ),  # fmt: skip
        )
    results["load_after"] = os.getloadavg()
    return results


def main(argv: list[str] | None = None, console=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small config, few repetitions")
    parser.add_argument("--config", choices=["small", "medium", "all"], default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--quality", action="store_true", help="also the 2,000-step quality run")
    parser.add_argument("--quality-steps", type=int, default=2000)
    args = parser.parse_args(argv)
    return benchmark(args.config, args.quick, args.out,
                     args.quality_steps if args.quality else 0, console)  # fmt: skip


def benchmark(config: str | None, quick: bool, out: Path | None, quality_steps: int,
              console=None) -> dict:  # fmt: skip
    """Run, print the table and the BLAS in use, and write JSON; returns the results."""
    from rich.console import Console

    from benchmarks.report import NOTES, rows, table

    console = console or Console(highlight=False)
    limit_threads()
    config = config or ("small" if quick else "all")
    names = list(CONFIGS) if config == "all" else [config]
    began = time.perf_counter()
    results = run(names, quick, quality_steps, lambda line: console.print(f"[dim]{line}[/dim]"))
    results["seconds"] = time.perf_counter() - began
    results["table"] = rows(results)
    info, m = results["machine"]["numpy_blas"], results["machine"]
    console.print(table(results))
    for note in NOTES:
        console.print(f"[dim]{note}[/dim]")
    console.print(
        f"numpy BLAS: {info['internal_api']} {info['version']}, kernel {info['kernel']}, "
        f"{info['num_threads']} threads; OPENBLAS_CORETYPE {info['OPENBLAS_CORETYPE']}; "
        f"torch BLAS: {m['torch_blas']}; CPU: {m['cpu']} x{m['cores']}; "
        f"load average {results['load_before'][0]:.1f} -> {results['load_after'][0]:.1f}"
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1, default=float) + "\n")
        console.print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()
