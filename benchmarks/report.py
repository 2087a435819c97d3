"""The results table: medians with their min-max spread, thread settings, ratios and targets."""

from __future__ import annotations

from rich import box
from rich.table import Table

from benchmarks.common import PLAIN, SPLIT

# (row key, metric, label, better, goal, must reach[, library, the PyTorch row's key]);
# ratio = that library (default: tinytorch, the accelerated reference) / torch
LINES = (
    ("train_small", "step_ms", "train step ms, small (d128 L4, B16 T64)", "<=", 1.0, 1.25),
    ("train_medium", "step_ms", "train step ms, medium (d256 L6, B16 T128)", "<=", 1.0, 1.1),
    ("train_small_own", "step_ms", "train step ms, small, own loop", "<=", 1.0, None),
    ("train_medium_own", "step_ms", "train step ms, medium, own loop", "<=", 1.0, None),
    ("gemm_small", "step_ms", "dense products alone ms, small, B8 1t (floor)", "<=", None, None),
    ("gemm_medium", "step_ms", "dense products alone ms, medium, B8 1t (floor)", "<=", None, None),
    ("train_small", "peak_mib", "peak train memory MiB, small", "<=", 0.8, None),
    ("train_medium", "peak_mib", "peak train memory MiB, medium", "<=", 0.8, None),
    ("train_medium_own", "peak_mib", "peak train memory MiB, medium, own loop", "<=", 0.8, None),
    ("gen_small", "tok_s", "cached greedy tokens/s, small, B1", ">=", 1.5, 1.0),
    ("gen_medium", "tok_s", "cached greedy tokens/s, medium, B1", ">=", 1.5, 1.0),
    ("gpt2", "forward_ms", "GPT-2 small forward ms, B1 T256", "<=", None, None),
    ("gpt2", "tok_s", "GPT-2 small cached greedy tokens/s", ">=", None, None),
    ("gpt2", "peak_mib", "GPT-2 small peak memory MiB (inference)", "<=", None, None),
    ("llama_train_small", "step_ms", "Llama train step ms, small", "<=", None, None),
    ("llama_gen_small", "tok_s", "Llama cached greedy tokens/s, small", ">=", None, None),
    ("llama_train_small", "step_ms", "Llama train step ms, small, plain", "<=", None, None, PLAIN),
    ("llama_gen_small", "tok_s", "Llama cached tok/s, small, plain", ">=", None, None, PLAIN),
    ("conv_lenet", "step_ms", "conv ms, LeNet C3 (B64 6->16 14x14 k5)", "<=", None, None),
    ("conv_large", "step_ms", "conv ms, B16 64->128 32x32 k3 p1", "<=", None, None),
    ("conv_lenet", "peak_mib", "conv peak memory MiB, LeNet C3", "<=", None, None),
    ("conv_large", "peak_mib", "conv peak memory MiB, 64->128 32x32", "<=", None, None),
    # the plain lesson code of modules 01-13 (no module 18; generation with module 17's cache)
    *((key, metric, f"{label}, plain 01-13", op, None, None, PLAIN) for key, metric, label, op in (
        ("train_small", "step_ms", "train step ms, small", "<="),
        ("train_medium", "step_ms", "train step ms, medium", "<="),
        ("train_small_own", "step_ms", "train step ms, small, own loop", "<="),
        ("train_medium_own", "step_ms", "train step ms, medium, own loop", "<="),
        ("train_small", "peak_mib", "peak train memory MiB, small", "<="),
        ("train_medium", "peak_mib", "peak train memory MiB, medium", "<="),
        ("gen_small", "tok_s", "cached greedy tokens/s, small", ">="),
        ("gen_medium", "tok_s", "cached greedy tokens/s, medium", ">="),
    )),
    ("gen_small_uncached", "tok_s", "uncached tok/s, small, plain 01-13 (vs cached)", ">=", None,
     None, PLAIN, "gen_small"),
    # the plain lessons in the own loop with accelerate's batch split alone (parts=())
    ("train_small_own", "step_ms", "train step ms, small, own loop, plain 01-13 split", "<=", 1.3,
     None, SPLIT),
    ("train_medium_own", "step_ms", "train step ms, medium, own loop, plain 01-13 split", "<=",
     1.3, None, SPLIT),
)  # fmt: skip


# The metric in the compact (80-column) table: a few words a line, at most three lines.
SHORT = (
    ("train step ms, ", "train ms\n"),
    ("peak train memory MiB, ", "train MiB\n"),
    ("uncached tok/s, ", "uncached\ntok/s "),
    ("cached greedy tokens/s, ", "cached tok/s\n"),
    ("GPT-2 small forward ms, B1 T256", "GPT-2 small\nforward ms"),
    ("GPT-2 small cached greedy tokens/s", "GPT-2 small\ncached tok/s"),
    ("GPT-2 small peak memory MiB (inference)", "GPT-2 small\nMiB"),
    ("conv ms, ", "conv ms\n"),
    ("conv peak memory MiB, ", "conv MiB\n"),
    (", own loop", ", own"),
    ("dense products alone ms, ", "products ms\n"),
    (", B8 1t (floor)", " (floor)"),
    (", plain 01-13 split", "\nplain split"),
    (", plain 01-13", "\nplain 01-13"),
    (" (vs cached)", ""),
    (" (d128 L4, B16 T64)", ""),
    (" (d256 L6, B16 T128)", ""),
    (", B1", ""),
    (" (B64 6->16 14x14 k5)", ""),
    ("B16 64->128 32x32 k3 p1", "64->128 k3"),
    (" 32x32", " k3"),
)


def short(label: str) -> str:
    for long, brief in SHORT:
        label = label.replace(long, brief)
    return label


def _cell(s: dict) -> str:
    digits = 0 if s["median"] >= 100 else 1
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}] @{s['setting']}"


def rows(results: dict) -> list[dict]:
    out = []
    for key, metric, label, op, goal, must, *rest in LINES:
        lib = rest[0] if rest else "tinytorch"
        r, r_ref = results["rows"].get(key), results["rows"].get(rest[1] if len(rest) > 1 else key)
        if r is None or r_ref is None or lib not in r["libraries"]:
            continue
        ours = r["libraries"][lib]["best"][metric]
        ref = r_ref["libraries"]["torch"]["best"][metric]
        ratio = ours["median"] / ref["median"]
        cpu_ratio = "-"
        if "cpu" in ours and "cpu" in ref and ours["setting"] == ref["setting"] == "1t":
            cpu_ratio = f"{ours['cpu']['median'] / ref['cpu']['median']:.2f}"

        def ok(limit, ratio=ratio, op=op):
            return ratio <= limit if op == "<=" else ratio >= limit

        status = "-" if goal is None else ("goal met" if ok(goal) else "goal missed")
        if must is not None and not ok(must):
            status = "MUST MISSED"
        target = "-" if goal is None else f"{op} {goal}" + (f" (must {op} {must})" if must else "")
        out.append(
            {
                "metric": label,
                "tinytorch": _cell(ours),
                "torch": _cell(ref),
                "ratio": f"{ratio:.2f}",
                "cpu_ratio": cpu_ratio,
                "target": target,
                "status": status,
                "processes": r["rounds"],
            }
        )
    return out


WIDE = 160  # the table's width with one line per row; narrower consoles get the compact form


def _compact(row: dict) -> tuple[str, ...]:
    """A row in two lines a cell: median and setting over the spread, the CPU ratio under."""

    def cell(text: str) -> str:
        median, spread, setting = text.split(" ")
        return f"{median} {setting}\n{spread}"

    target = row["target"].replace(" (must", "\nmust").rstrip(")")
    cpu = "" if row["cpu_ratio"] == "-" else f"\ncpu {row['cpu_ratio']}"
    return (short(row["metric"]), cell(row["tinytorch"]), cell(row["torch"]), row["ratio"] + cpu,
            target, row["status"].replace("goal ", ""))  # fmt: skip


def table(results: dict, width: int = WIDE) -> Table:
    """The results; below WIDE columns, each row in two lines that fit 80 columns."""
    compact = width < WIDE
    t = Table(
        title="tinytorch vs PyTorch (CPU, float32, one process per measurement)",
        title_justify="left",
        box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
        show_lines=False,
    )
    columns = ("metric", "tinytorch", "torch", "ratio", "cpu_ratio", "target", "status")
    headers = ("metric", "tinytorch", "torch", "ratio", "target", "goal") if compact else columns
    for name in headers:
        t.add_column(
            name,
            justify="left" if name in ("metric", "status", "goal") else "right",
            no_wrap=compact and name not in ("metric", "goal"),  # "MUST MISSED" may wrap
            min_width=11 if compact and name == "metric" else None,  # "plain 01-13" on a line
        )
    for row in rows(results):
        if compact:
            t.add_row(*_compact(row), end_section=True)
        else:
            t.add_row(*(row[k] for k in columns))
    q = results.get("quality")
    if q:
        t.add_row(
            f"final val loss ({q['steps']} steps, small)",
            f"{q['val_loss']['tinytorch']:.3f}",
            f"{q['val_loss']['torch']:.3f}",
            ("gap\n" if compact else "gap ") + f"{q['val_loss_gap']:+.3f}",
            *([] if compact else ["-"]),
            "<= 0.05",
            "ok" if abs(q["val_loss_gap"]) <= 0.05 else "MISSED",
        )
    return t


NOTES = (
    "cells: median over processes, (min-max) in brackets, @ thread setting; each process "
    "reports the median of its own timed calls; each library at its fastest setting: 1t or 2t "
    "(BLAS / torch intra-op threads) or, for training, 2w (the batch split in two halves of one "
    "BLAS / torch thread each: tinytorch's DataParallel as the GPT milestone runs it, the second "
    "half on a forked worker on Linux, and the same split on two threads for PyTorch).",
    "ratio = tinytorch / torch of the medians (time, memory, tokens/s); cpu_ratio = the same "
    "from the CPU time of those processes (time.process_time), shown when both ran one thread: "
    "it leaves out the time a process waited for a core, so it moves less with the machine's load.",
    "own loop = a user's loop as the README writes it (model(x), loss.backward(), opt.step()) "
    "at the libraries' default threads, one process each: no thread setting, no DataParallel; "
    "tinytorch's accelerated GPT splits the batch over the cores itself (a forked worker "
    "process on Linux, whose CPU time is counted with its caller's), PyTorch runs its default "
    "intra-op threads. plain 01-13 split = the plain lessons after `accelerate(model, "
    "parts=())`, which swaps no layer and only splits the batch over the cores; the plain own "
    "loop without it runs every elementwise pass of the lessons on one core.",
    "products alone (the floor) = a training step's dense matrix products only (each "
    "Linear's forward, input gradient and weight gradient, the tied head's too) on one core's "
    "half of the own loop's batch, one thread: numpy's BLAS against PyTorch's. A step with "
    "everything else as fast as PyTorch's would have this ratio; the own loop's ratio is read "
    "against it.",
    "peak memory = VmHWM (peak RSS) of the measuring process minus its VmHWM right after the "
    "imports, plus a forked worker's private memory at its peak: weights, gradients, optimizer "
    "state, activations and temporaries.",
)


def markdown(results: dict) -> str:
    """The table and notes as Markdown (the head of RESULTS.md)."""
    m = results["machine"]
    blas, torch = m["blas"], m["torch"]
    lines = [
        f"Measured {results['date']} with `python -m benchmarks.run` "
        f"({'quick' if results.get('quick') else 'full'} plan, {results['seconds']:.0f} s).",
        f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, numpy {m['numpy']} "
        f"(BLAS {blas['internal_api']} {blas['version']}, kernel {blas['kernel']}, "
        f"OPENBLAS_CORETYPE {blas['OPENBLAS_CORETYPE']}); torch {torch['version']} "
        f"(BLAS {torch['blas']}, CPU capability {torch['cpu_capability']}); float32.",
        f"Load average (1 min) before / after: {results['load_before'][0]:.1f} / "
        f"{results['load_after'][0]:.1f}.",
        "",
        "| metric | tinytorch | PyTorch | ratio | CPU-time ratio | target | status |",
        "|---|--:|--:|--:|--:|---|---|",
    ]
    for r in rows(results):
        lines.append(
            f"| {r['metric']} | {r['tinytorch']} | {r['torch']} | {r['ratio']} | "
            f"{r['cpu_ratio']} | {r['target']} | {r['status']} |"
        )
    return "\n".join([*lines, "", *(f"- {note}" for note in NOTES), ""])


if __name__ == "__main__":  # python -m benchmarks.report results.json
    import json
    import sys
    from pathlib import Path

    print(markdown(json.loads(Path(sys.argv[1]).read_text())), end="")
