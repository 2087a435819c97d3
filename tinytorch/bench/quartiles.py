"""The one summary of a set of timings: its quartiles, the median among them.

Module 14's `latency` and module 19's `summarize` both report a median with the interquartile
range `q3 - q1` (one slow outlier moves neither), computed here once: numpy's linear-interpolation
percentiles, in float64.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson; it imports nothing from the course.
"""

from __future__ import annotations

import numpy as np


def quartiles(samples) -> tuple[float, float, float]:
    """(q1, median, q3) of `samples`, the 25th, 50th and 75th percentiles."""
    values = np.asarray(samples, dtype=np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError("quartiles of no samples; time at least one call")
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return float(q1), float(median), float(q3)


__all__ = ["quartiles"]
