"""`tito milestone run olympics` (2018): the reference package through every Torch Olympics event.

2018 is the year of DAWNBench's results, the first benchmark that ranked deep-learning systems by
time and cost to a fixed quality rather than by speed alone: the rule module 20 follows. This
milestone takes the trained GPT of `tito milestone run gpt` (or trains a small one, as the compress
milestone does) and enters it five times, plain, accelerated (module 18), quantized to int8 per
channel (15), with half its heads and neurons removed (16) and factorised to half rank (16),
each measured by the olympics' own code (milestones/olympics.py) and scored by module 20's rules
against the plain model. The quality event trains the default settings twice under the same
CPU-second budget, plain and accelerated: what the faster code buys in quality.
"""

from __future__ import annotations

import time
from pathlib import Path

from milestones import budget as clock
from milestones import olympics, provenance
from milestones.compress import FULL, ON_A_TRAINED_RUN, QUICK, trained_gpt
from milestones.output import keep_earlier, prepare_out, write_json
from milestones.registry import Milestone, RunOptions
from tinytorch.core.checkpoint import write_atomic

RUN_FILES = ("summary.json", "table.md", "olympics.png")
# whose code each part of the contest runs (the run's header names yours or the reference's)
CODE = {"the GPT": 13, "int8": 15, "pruning, low rank": 16, "caching": 17, "acceleration": 18,
        "timing": 19, "rules": 20}  # fmt: skip
ENTRIES = {
    "plain": [],
    "accelerated": ["accelerate"],
    "int8 per channel": ["quantize:int8-per-channel"],
    "half the heads and neurons": ["prune-structure:0.5"],
    "half rank": ["lowrank:0.5"],
}
SCORED = ("speed", "size", "all-around")
BUDGET = {True: 8.0, False: 30.0}  # quality: CPU-seconds per model (--quick, full)


def measured_entries(folder: Path, data_dir: Path | None, repeats: int, console) -> dict:
    rows = {}
    for name, transforms in ENTRIES.items():
        m = olympics.measure(folder, transforms, data_dir, repeats)
        rows[name] = {"transforms": transforms, **vars(m)}
        console.print(
            f"{name:<28} {m.tokens_per_second:>8,.0f} tok/s {m.bytes:>11,} bytes "
            f"{m.bits_per_char:.3f} bits/char",
            highlight=False,
        )
    return rows


def scores(rows: dict, quality: dict, spent: float) -> dict:
    from tinytorch.olympics.events import EVENTS, Measured
    from tinytorch.olympics.rules import score, violation

    def as_measured(row):
        return Measured(row["tokens_per_second"], row["bytes"], row["bits_per_char"],
                        row.get("train_cpu_seconds", 0.0))  # fmt: skip

    base = as_measured(rows["plain"])
    table = {
        name: {e: score(EVENTS[e], as_measured(r), base) for e in SCORED}
        | {"broken": {e: violation(EVENTS[e], as_measured(r), base) for e in SCORED}}
        for name, r in rows.items()
    }
    q_base = as_measured(quality["plain"])
    table["quality"] = {
        name: score(EVENTS["quality"], as_measured(r), q_base, spent) for name, r in quality.items()
    }
    return table


def markdown(rows: dict, table: dict, quality: dict) -> str:
    lines = [
        "| entry | tok/s | bytes | held-out bits/char | speed | size | all-around |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        s = table[name]
        lines.append(
            f"| {name} | {r['tokens_per_second']:,.0f} | {r['bytes']:,} | "
            f"{r['bits_per_char']:.3f} | {s['speed']:.2f} | {s['size']:.2f} | "
            f"{s['all-around']:.2f} |"
        )
    lines += ["", "| quality entry | training CPU-s | held-out bits/char | quality score |",
              "|---|---|---|---|"]  # fmt: skip
    for name, r in quality.items():
        lines.append(
            f"| {name} | {r['train_cpu_seconds']:.1f} | {r['bits_per_char']:.3f} | "
            f"{table['quality'][name]:.3f} |"
        )
    lines += ["", "A score is the improvement over the plain model (1 = the same); 0 means a rule "
              "was broken (held-out bits/char more than 2% above plain in speed, 5% in size and "
              "all-around)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(rows: dict, path: Path) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    biggest = max(r["bytes"] for r in rows.values())
    for name, r in rows.items():
        ax.scatter(r["tokens_per_second"], r["bits_per_char"], s=400 * r["bytes"] / biggest,
                   alpha=0.6)  # fmt: skip
        ax.annotate(name, (r["tokens_per_second"], r["bits_per_char"]), fontsize=8,
                    xytext=(6, 4), textcoords="offset points")  # fmt: skip
    base = rows["plain"]["bits_per_char"]
    ax.axhline(base * 1.02, color="grey", linestyle="--", linewidth=0.8)
    ax.text(ax.get_xlim()[0], base * 1.02, " speed bound (+2%)", fontsize=7, va="bottom")
    ax.set_xlabel("cached generation, tokens per second")
    ax.set_ylabel("held-out bits per character")
    ax.set_title("Torch Olympics entries (marker area: bytes)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def run(milestone: Milestone, opts: RunOptions) -> dict:
    """The whole milestone; returns the summary it writes to <out>/summary.json."""
    steps = {"--steps": "trains under a CPU-second budget (--quick for a smaller one)"}
    opts.refuse(milestone.name, {**ON_A_TRAINED_RUN, **steps})
    console = opts.console
    began = time.perf_counter()
    prepare_out(opts.out)
    kept = keep_earlier(opts.out, list(RUN_FILES))
    if kept is not None:
        console.print(f"the earlier run in {opts.out} was moved to {kept}", highlight=False)
    folder = trained_gpt(opts, QUICK if opts.quick else FULL)
    repeats = 2 if opts.quick else 5
    console.print(f"the Torch Olympics on the GPT of {folder}, {repeats} timed generations each")
    console.print(provenance.code_line(CODE, opts.completed), highlight=False)
    rows = measured_entries(folder, opts.data_dir, repeats, console)
    spent = BUDGET[opts.quick]
    quality = {}
    for name, transforms in (("plain", []), ("accelerated", ["accelerate"])):
        out = opts.out / "quality" / name.replace(" ", "-")
        cpu = clock.train(clock.settings({}), transforms, out, spent, opts.data_dir)
        m = olympics.measure(out, transforms, opts.data_dir, repeats)
        quality[name] = {"transforms": transforms, **vars(m), "train_cpu_seconds": cpu}
        console.print(f"quality, {name}: {m.bits_per_char:.3f} bits/char after {cpu:.1f} CPU-s")
    table = scores(rows, quality, spent)
    text = markdown(rows, table, quality)
    write_atomic(opts.out / "table.md", lambda handle: handle.write(text.encode()))
    console.print(text, highlight=False, markup=False)
    files = [plot(rows, opts.out / "olympics.png")]
    summary = {
        "milestone": milestone.name,
        "source": str(folder),
        "quick": opts.quick,
        "repeats": repeats,
        "quality_budget_cpu_seconds": spent,
        "entries": rows,
        "quality": quality,
        "scores": table,
        "seconds": time.perf_counter() - began,
        "files": [p.name for p in files] + ["table.md", "summary.json"],
    }
    write_json(opts.out / "summary.json", summary)
    return summary
