"""The given report of module 14 (tinytorch/profile/report.py): the machine's roofs, the
operation table and the two plots, over rows that module 14's `by_operation` makes."""

import numpy as np
from matplotlib.figure import Figure

from tinytorch.profile.events import OUTSIDE, OpEvent
from tinytorch.profile.profiler import by_operation
from tinytorch.profile.report import machine_rates, operation_table, plot_roofline, plot_time


def event(op, phase, seconds, matmul=0, other=0):
    return OpEvent(op, phase, seconds, matmul, other, 100, 0, "")


def test_the_report_shows_every_row_and_plots_them():
    events = [
        event("MatMul", "forward", 0.2, 10**9),
        event("LayerNormFunction", "backward", 0.1, 0, 10**6),
        event("Kernel", "forward", 0.05, 0, None),
    ]
    rows = by_operation(events, wall_seconds=0.5)
    rates = {"matmul_gflops": 10.0, "copy_gbytes": 5.0}
    text = operation_table(rows, rates)
    for name in ("MatMul fwd", "LayerNormFunction bwd", "Kernel fwd", OUTSIDE):
        assert name in text
    assert "5.00" in text and "50.0%" in text  # 1 GFLOP in 0.2 s: 5 GFLOP/s, half the roof
    assert text.splitlines()[-1] == "time in matrix multiplies: 40.0% of the wall time"
    bars = plot_time(rows)
    assert isinstance(bars, Figure) and len(bars.axes[0].patches) == len(rows)
    roof = plot_roofline(rows, rates)
    assert len(roof.axes[0].lines) == 1 + 2  # the roof, and the two operations with counts


def test_machine_rates_measure_both_roofs():
    rates = machine_rates(size=64, repeats=2)
    assert set(rates) == {"matmul_gflops", "copy_gbytes"}
    assert all(np.isfinite(v) and v > 0 for v in rates.values())
