"""How two arrays differ: the size and place of the error, and a guess at its cause from its shape.

`compare(yours, expected, rtol, atol, about)` returns None when they agree, else a `Difference`.
The guesses are the slips students make most: a transpose, a sign, a missing 1/sqrt(d) or 1/n, a
reduction or a broadcast over the wrong axis, a missing epsilon, a value that overflowed. Only
numbers are compared; `about` (words naming the operation: its class, its layer, the student's
line) only keeps a guess to where it fits: a 1/sqrt(d) scale for attention scores, an epsilon or
a variance where a normalisation or an optimizer's denominator has one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

RTOL, ATOL = 1e-4, 1e-5
SCORES = re.compile(r"attention|attn|score|softmax|query|key", re.I)  # where 1/sqrt(d) belongs
EPSILON = re.compile(r"norm|eps|var|std|adam|rms", re.I)  # where an epsilon is in the formula


@dataclass
class Difference:
    summary: str  # "max abs error 0.83 at [1, 2, 0] (yours 0.12, expected -0.71); max rel 1.3"
    hint: str  # the likely cause, one line


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _where(index: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _shape_hint(yours: np.ndarray, expected: np.ndarray) -> str:
    ys, es = yours.shape, expected.shape
    if ys == es[::-1] or (len(ys) >= 2 and ys == es[:-2] + es[-1:-3:-1]):
        return "the shape is the expected one with its axes swapped: a transpose (.T) slip"
    if len(ys) == len(es):
        mine = [a for a in range(len(ys)) if ys[a] == 1 and es[a] != 1]
        theirs = [a for a in range(len(ys)) if es[a] == 1 and ys[a] != 1]
        rest = [a for a in range(len(ys)) if a not in mine and a not in theirs]
        if mine and theirs and all(ys[a] == es[a] for a in rest):
            names = ", ".join(f"axis={a - len(ys)}" if a else f"axis={a}" for a in theirs)
            return (
                f"reduced over axis {' and '.join(map(str, mine))} where the expected is reduced "
                f"over axis {' and '.join(map(str, theirs))}: a mean or sum over the wrong axis "
                f"({names} belongs)"
            )
    squeezed = tuple(d for d in ys if d != 1), tuple(d for d in es if d != 1)
    if squeezed[0] == squeezed[1]:
        return "only axes of size 1 differ: a missing or extra keepdims=True, or a missing squeeze"
    if yours.size == expected.size:
        return "the same number of values in another shape: a reshape or transpose slip"
    try:
        np.broadcast_shapes(ys, es)
    except ValueError:
        return "the shapes do not even broadcast together: check the axes of every step"
    return "a broadcasting slip: two arrays of different shapes were combined along the wrong axes"


def _factor_hint(k: float, scores: bool = False, softmax: bool = False) -> str:
    """A constant factor, named when it is a count or, for attention scores (`scores`), a
    square root: the scale attention divides by (for softmax rows, the square root first)."""
    for value, words in ((k, "larger"), (1 / k, "smaller")):
        whole = round(value)
        if not softmax and whole >= 2 and math.isclose(value, whole, rel_tol=1e-4):
            scale = f", or a missing (or doubled) 1/sqrt(d) scale with d = {whole * whole}"
            return (
                f"every value is {whole} times {words} than expected: a sum where a mean belongs "
                f"(or a mean where a sum does) over {whole} values" + scale * scores
            )
    for value, words in ((k, "larger"), (1 / k, "smaller")) if scores else ():
        square = round(value * value)
        if square >= 2 and math.isclose(value, math.sqrt(square), rel_tol=1e-3):
            return (
                f"every value is {_fmt(value)} = sqrt({square}) times {words} than expected: a "
                f"missing (or doubled) 1/sqrt(d) scale, with d = {square}"
            )
    if math.isclose(k, -1.0, rel_tol=1e-4):
        return "yours is the expected value with its sign flipped: a sign slip"
    return f"every value is {_fmt(k)} times the expected one: a missing or wrong constant factor"


def _softmax_temperature(yours: np.ndarray, expected: np.ndarray) -> float | None:
    """When both are softmax rows (last axis), the factor k with yours = softmax(k * scores) of
    the scores behind `expected`; None when they are not, or no single factor explains them."""
    if yours.ndim < 1 or yours.shape[-1] < 2 or (yours < 0).any() or (expected < 0).any():
        return None
    if not (
        np.allclose(yours.sum(-1), 1, atol=1e-4) and np.allclose(expected.sum(-1), 1, atol=1e-4)
    ):
        return None
    both = (yours > 1e-12) & (expected > 1e-12)
    with np.errstate(divide="ignore"):
        ly, le = np.log(np.where(both, yours, 1.0)), np.log(np.where(both, expected, 1.0))
    count = np.maximum(both.sum(-1, keepdims=True), 1)
    ly = np.where(both, ly - (ly * both).sum(-1, keepdims=True) / count, 0.0)
    le = np.where(both, le - (le * both).sum(-1, keepdims=True) / count, 0.0)
    if float(np.abs(le).max()) < 1e-6:
        return None
    k = float((ly * le).sum() / (le * le).sum())
    return k if np.allclose(ly, k * le, rtol=1e-3, atol=1e-4) else None


def _constant_along(diff: np.ndarray, rtol: float, atol: float) -> list[int]:
    """The axes along which the error does not change (each alone)."""
    return [
        axis
        for axis in range(diff.ndim)
        if diff.shape[axis] > 1
        and np.allclose(diff, diff.mean(axis=axis, keepdims=True), rtol=rtol, atol=atol)
    ]


def _two_term_axes(diff: np.ndarray, rtol: float, atol: float) -> tuple[int, int] | None:
    """Axes (a, b) such that the error is a term constant along a plus one constant along b."""
    for a in range(diff.ndim):
        for b in range(a + 1, diff.ndim):
            if diff.shape[a] == 1 or diff.shape[b] == 1:
                continue
            f = np.zeros_like(diff)
            g = np.zeros_like(diff)
            for _ in range(20):  # backfitting: each term is the other's residual averaged
                f = (diff - g).mean(axis=a, keepdims=True) + 0 * diff
                g = (diff - f).mean(axis=b, keepdims=True) + 0 * diff
            if np.allclose(f + g, diff, rtol=rtol, atol=atol):
                return a, b
    return None


def _sums_to_one(a: np.ndarray) -> list[int]:
    """The axes along which `a` is non-negative and adds up to 1 (a softmax's or a
    normalisation's axis)."""
    if a.ndim == 0 or not bool((a >= -1e-6).all()):
        return []
    return [ax for ax in range(a.ndim) if a.shape[ax] > 1 and np.allclose(a.sum(axis=ax), 1.0,
                                                                            atol=1e-4)]  # fmt: skip


def _value_hint(yours: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
                about: str = "") -> str:  # fmt: skip
    finite_y, finite_e = np.isfinite(yours), np.isfinite(expected)
    epsilon = bool(EPSILON.search(about))
    if (~finite_y & finite_e).any():
        return (
            "yours is inf or nan where the expected value is finite: a division by zero or an "
            "overflow (" + "a missing epsilon, or " * epsilon + "exp without subtracting the "
            "maximum first, or a step too large)"
        )
    if yours.ndim >= 2 and yours.shape[-1] == yours.shape[-2]:
        if _close(yours, np.swapaxes(expected, -1, -2), rtol, atol):
            return "yours is the expected value transposed (its last two axes swapped): a .T slip"
    if _close(yours, -expected, rtol, atol):
        return "yours is the expected value with its sign flipped: a sign slip"
    if np.allclose(yours, 0, atol=atol) and not np.allclose(expected, 0, atol=atol):
        return "yours is all zeros: this step is not computed (or its result is not returned)"
    theirs, mine = _sums_to_one(expected), _sums_to_one(yours)
    if theirs and mine and not set(theirs) & set(mine):
        return (
            f"yours adds up to 1 along axis {mine[0]} where the expected adds up to 1 along axis "
            f"{theirs[0]}: a softmax (or normalisation) over the wrong axis"
        )
    k = _softmax_temperature(yours, expected)
    if k is not None:
        return "these softmax rows come from scores that are off by a factor: " + _factor_hint(
            k, scores=True, softmax=True
        )
    scale = np.abs(expected) > 1e-6 * max(np.abs(expected).max(), 1e-30)
    if scale.any():
        ratios = yours[scale] / expected[scale]
        k = float(np.median(ratios))
        if k != 0 and np.isfinite(k) and _close(yours, k * expected, rtol, atol):
            return _factor_hint(k, scores=bool(SCORES.search(about)))
    with np.errstate(all="ignore"):
        diff = np.where(finite_y & finite_e, yours - expected, 0.0).astype(np.float64)
    c = float(diff.mean())
    if np.allclose(diff, c, rtol=rtol, atol=atol):
        return f"every value is off by the same {_fmt(c)}: a missing or extra constant term"
    axes = _constant_along(diff, rtol, atol) if diff.ndim >= 2 else []
    if axes:
        which = " and ".join(f"axis {a}" for a in axes)
        return (
            f"the error is the same all along {which}: a mean or sum over the wrong axis, or a "
            "value broadcast along the wrong axis"
        )
    pair = _two_term_axes(diff, rtol, atol) if 2 <= diff.ndim <= 4 else None
    if pair is not None:
        return (
            f"the error is one term constant along axis {pair[0]} plus one constant along axis "
            f"{pair[1]}: a mean or sum over the wrong axis (for example axis={pair[1]} where "
            f"axis={pair[0]} belongs)"
        )
    rel = np.abs(diff) / (np.abs(expected) + atol)
    if float(rel.max()) < 5e-2 and epsilon:
        return (
            "close but not equal everywhere (under 5% off): a missing or different epsilon, or a "
            "slightly different formula (a biased vs unbiased variance, float32 vs float64)"
        )
    if float(rel.max()) < 5e-2:
        return (
            "close but not equal everywhere (under 5% off): a slightly different formula, or a "
            "step in float32 where float64 belongs (or the other way round)"
        )
    return "the error has no simple pattern: recheck this step's formula against the lesson"


def compare(yours, expected, rtol: float = RTOL, atol: float = ATOL,
            about: str = "") -> Difference | None:  # fmt: skip
    """None if `yours` matches `expected` within the tolerances, else how it differs (`about`:
    words naming the operation, that keep each guess to where it fits)."""
    yours, expected = np.asarray(yours), np.asarray(expected)
    if yours.shape != expected.shape:
        return Difference(
            f"shape {tuple(yours.shape)} where {tuple(expected.shape)} is expected",
            _shape_hint(yours, expected),
        )
    if expected.size == 0 or _close(yours, expected, rtol, atol):
        return None
    y64, e64 = yours.astype(np.float64), expected.astype(np.float64)
    with np.errstate(all="ignore"):  # inf - inf where both block a score (a mask) is no error
        err = np.abs(np.where(np.isnan(y64) != np.isnan(e64), np.inf, np.nan_to_num(y64 - e64)))
        rel = err / (np.abs(e64) + atol)
    index = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
    wrong = float(np.mean(~np.isclose(y64, e64, rtol=rtol, atol=atol)))
    at, mine, want = _where(index), _fmt(float(y64[index])), _fmt(float(e64[index]))
    summary = (
        f"max abs error {_fmt(float(err.max()))} at {at} (yours {mine}, expected {want}); "
        f"max rel error {_fmt(float(rel.max()))}; "
        f"{wrong:.0%} of {expected.size} values off"
    )
    return Difference(summary, _value_hint(y64, e64, rtol, atol, about))


__all__ = ["Difference", "compare"]
