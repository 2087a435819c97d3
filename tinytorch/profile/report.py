"""The machine's roofs, a table and plots of where the time goes.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: module 14 explains what it shows.
`machine_rates` measures this computer's two roofs with module 14's `latency`: the rate of one
large float32 matrix multiply and the bandwidth of copying a large array. An operation with few
FLOPs per byte (`intensity`) cannot beat `bandwidth x intensity` however fast the arithmetic is
(the sloped roof); above the knee the flat roof is the matmul rate. `operation_table` prints
`by_operation`'s rows, `plot_time` their share of the wall time, `plot_roofline` each operation
under the two roofs.
"""

import numpy as np

from tinytorch.profile.profiler import latency, matmul_share


def machine_rates(size: int = 512, repeats: int = 7) -> dict[str, float]:
    """Measured float32 matmul GFLOP/s (size x size) and copy bandwidth in GB/s."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = np.empty_like(a)
    mm = latency(lambda: np.matmul(a, b, out=out), warmup=2, repeats=repeats)
    src = np.ones(8 * 2**20, dtype=np.float32)  # 32 MB, more than the caches hold
    dst = np.empty_like(src)
    copy = latency(lambda: np.copyto(dst, src), warmup=2, repeats=repeats)
    # a roof is the best the machine does, not what it usually does: the fastest repeat
    return {"matmul_gflops": 2 * size**3 / mm.times.min() / 1e9,
            "copy_gbytes": 2 * src.nbytes / copy.times.min() / 1e9}  # fmt: skip


PHASES = {"forward": "fwd", "backward": "bwd", "": ""}


def _flops(n) -> str:
    return "-" if n is None else f"{n / 1e6:,.1f}"


def operation_table(rows, rates: dict | None = None, top: int | None = None) -> str:
    """The rows as text: time, share, MFLOPs, GFLOP/s and the share of the matmul roof."""
    head = f"{'operation':<28}{'calls':>6}{'ms':>9}{'share':>7}{'MFLOP':>11}{'GFLOP/s':>9}"
    head += f"{'of roof':>8}" if rates else ""
    lines = [head, "-" * len(head)]
    for r in rows[:top] if top else rows:
        name = r.op if not r.phase else f"{r.op} {PHASES[r.phase]}"
        line = f"{name:<28}{r.calls:>6}{r.seconds * 1e3:>9.2f}{r.share:>7.1%}"
        rate = (
            f"{r.gflops:>9.2f}"
            if r.kind != "outside" and r.other_flops is not None
            else f"{'-':>9}"
        )
        line += f"{_flops(r.flops if r.other_flops is not None else None):>11}{rate}"
        if rates:
            roof = r.gflops / rates["matmul_gflops"] if r.kind != "outside" else None
            line += f"{'-':>8}" if roof is None else f"{roof:>8.1%}"
        lines.append(line)
    lines.append(f"time in matrix multiplies: {matmul_share(rows):.1%} of the wall time")
    return "\n".join(lines)


COLOURS = {"matmul": "tab:blue", "other": "tab:orange", "outside": "tab:gray"}


def plot_time(rows, title: str = "where the time goes", top: int = 12):
    """Horizontal bars of each operation's share of the wall time, matmuls in blue."""
    from matplotlib.figure import Figure  # lazily: the package itself needs numpy only

    shown = rows[:top]
    figure = Figure(figsize=(7, 0.35 * len(shown) + 1.5))
    axes = figure.subplots()
    labels = [r.op if not r.phase else f"{r.op} ({r.phase})" for r in shown][::-1]
    axes.barh(labels, [100 * r.share for r in shown][::-1],
              color=[COLOURS[r.kind] for r in shown][::-1])  # fmt: skip
    axes.set_xlabel("% of the wall time")
    axes.set_title(f"{title}: {matmul_share(rows):.0%} in matrix multiplies (blue)")
    figure.tight_layout()
    return figure


def plot_roofline(rows, rates: dict, title: str = "roofline"):
    """Each operation at (FLOPs per byte, achieved GFLOP/s) under the machine's two roofs."""
    from matplotlib.figure import Figure

    points = [r for r in rows if r.kind != "outside" and r.flops and r.seconds > 0]
    figure = Figure(figsize=(7, 5))
    axes = figure.subplots()
    peak, bandwidth = rates["matmul_gflops"], rates["copy_gbytes"]
    x = np.logspace(-2, 3, 200)
    axes.loglog(
        x, np.minimum(peak, bandwidth * x), "k-", label="roof: min(matmul rate, bandwidth x I)"
    )
    for r in points:
        axes.loglog(r.intensity, r.gflops, "o", color=COLOURS[r.kind])
        axes.annotate(f"{r.op} {PHASES[r.phase]}", (r.intensity, r.gflops), fontsize=7)
    axes.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
    axes.set_ylabel("achieved GFLOP/s")
    axes.set_title(title)
    axes.legend(loc="lower right")
    figure.tight_layout()
    return figure


__all__ = ["machine_rates", "PHASES", "operation_table", "COLOURS", "plot_time",
    "plot_roofline"]  # fmt: skip
