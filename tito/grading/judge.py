"""The judge: a probe's numbers from the student's run against the reference's, on one seed.

A graded cell that is a probe (`@graded`, tinytorch/checks.py) runs in two sandboxes on a seed
the grader picks (tito/grading/scoring.py): over the student's code, and over the reference. Each
sends
back only numbers (tito/sandbox/npzwire.py). This file decides, in tito's own process, which has
imported neither: the student's check passes when every probe the reference ran returned the
same names, shapes and kinds of number, finite where the reference's are, and values within the
probe's tolerances, which are taken from the reference's run, never the student's. A missing or
extra name, an exception, a NaN where the reference has a number, a crash: that check scores 0.
What the student's process printed or claimed has no say.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tito.curriculum.notebooks import AST_LOCK
from tito.sandbox import limits, npzwire

KINDS = {"b": "bool", "i": "integer", "u": "integer", "f": "float"}


@dataclass
class Numbers:
    """What one run of one check cell's probes returned."""

    probes: list[dict] = field(default_factory=list)  # {"name", "keys", "error", "tolerance"}
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # "p<i>_<key>" -> array
    problem: str = ""  # why there are no usable numbers ("" when there are)


def read_numbers(sent: list[bytes]) -> Numbers:
    """The numbers of one check from its run's `numbers` lines (exactly one is expected)."""
    if not sent:
        return Numbers(problem="no numbers came back")
    if len(sent) > 1:
        return Numbers(problem="more than one set of numbers came back (tampering)")
    try:
        arrays, record = npzwire.unpack(sent[0], limits.JUDGE_BYTES, AST_LOCK,
                                        max_arrays=limits.WIRE_ARRAYS,
                                        max_depth=limits.WIRE_DEPTH)  # fmt: skip
    except npzwire.WireError as err:
        return Numbers(problem=f"unreadable numbers: {err}")
    probes = record.get("probes")
    if not isinstance(probes, list) or not all(isinstance(p, dict) for p in probes):
        return Numbers(problem="unreadable numbers: no list of probes")
    if len(probes) > MAX_PROBES or not all(_probe_ok(p) for p in probes):
        return Numbers(problem="unreadable numbers: a probe's record is malformed")
    return Numbers([dict(p) for p in probes], arrays)


MAX_PROBES = 256  # probes in one check's record (the course's checks have at most a few)


def _probe_ok(probe: dict) -> bool:
    """A probe's record as check_runner.py writes it: keys a list of names, error text or
    nothing, tolerance a mapping of numbers (only the reference's is ever used)."""
    keys, error, tolerance = probe.get("keys") or [], probe.get("error"), probe.get("tolerance")
    return (
        isinstance(keys, list)
        and len(keys) <= limits.WIRE_ARRAYS
        and all(isinstance(k, str) for k in keys)
        and (error is None or isinstance(error, str))
        and (
            tolerance is None
            or isinstance(tolerance, dict)
            and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in tolerance.values()
            )
        )
    )


def _tolerance(probe: dict) -> tuple[float, float] | None:
    """The reference probe's own (rtol, atol), which its `@graded` states (tinytorch/checks.py
    holds the one default); None when it states none."""
    tolerance = probe.get("tolerance") or {}
    if "rtol" not in tolerance or "atol" not in tolerance:
        return None
    return float(tolerance["rtol"]), float(tolerance["atol"])


def compare_value(name: str, mine: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> str:
    """ "" when `mine` stands for the same numbers as `ref`, else one line saying how not.
    The reference's values are never shown."""
    if mine.shape != ref.shape:
        return f"'{name}' has shape {mine.shape}; the reference's has shape {ref.shape}"
    if KINDS[mine.dtype.kind] != KINDS[ref.dtype.kind]:
        mine_kind, ref_kind = KINDS[mine.dtype.kind], KINDS[ref.dtype.kind]
        return f"'{name}' holds {mine_kind}s; the reference's holds {ref_kind}s"
    a, b = mine.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(b)
    if not np.array_equal(np.isfinite(a), finite):
        bad = int(np.count_nonzero(np.isfinite(a) != finite))
        return f"'{name}' is NaN or infinite in {bad} place(s) where the reference's is finite"
    if not np.array_equal(a[~finite], b[~finite], equal_nan=True):
        return f"'{name}' has the wrong NaN or infinity where the reference's is not finite"
    a, b = a[finite], b[finite]
    close = np.abs(a - b) <= atol + rtol * np.abs(b)
    if not close.all():
        worst = float(np.max(np.abs(a - b)))
        return (
            f"'{name}' differs from the reference in {int(np.count_nonzero(~close))} of "
            f"{close.size} value(s) (largest difference {worst:.3g}; allowed rtol={rtol:g}, "
            f"atol={atol:g})"
        )
    return ""


def judge(mine: Numbers, reference: Numbers) -> str:
    """ "" when the student's run of a check matches the reference's, else the first reason."""
    if reference.problem:
        return f"the reference gave no numbers for this check ({reference.problem})"
    if mine.problem:
        return mine.problem
    if len(mine.probes) != len(reference.probes):
        return f"{len(mine.probes)} probe(s) ran; the check has {len(reference.probes)}"
    for number, (theirs, ref) in enumerate(zip(mine.probes, reference.probes, strict=True)):
        if ref.get("error"):
            return f"the reference's probe failed on this seed ({ref['error']})"
        if theirs.get("error"):
            return str(theirs["error"])[:400]
        keys, ref_keys = list(theirs.get("keys") or []), list(ref.get("keys") or [])
        missing = [k for k in ref_keys if k not in keys]
        extra = [k for k in keys if k not in ref_keys]
        if missing:
            return f"the probe returned no '{missing[0]}'"
        if extra:
            return f"the probe returned '{str(extra[0])[:60]}', which the check does not return"
        tolerance = _tolerance(ref)
        if tolerance is None:
            return "the reference's probe states no tolerance (a course error: @graded sets one)"
        rtol, atol = tolerance
        for key in ref_keys:
            got = mine.arrays.get(f"p{number}_{key}")
            want = reference.arrays.get(f"p{number}_{key}")
            if want is None:
                return f"the reference's '{key}' is missing"
            if got is None:
                return f"the probe returned no '{key}'"
            why = compare_value(key, got, want, rtol, atol)
            if why:
                return why
    return ""
