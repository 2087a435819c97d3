"""A trace as tito reads it back from a diagnosis run (tito/sandbox/trace_runner.py): numbers
only (tito/sandbox/npzwire.py, bounded before parsing) and a record of events that must have the
runner's shape. A run of a submission wrote it, so a crafted one must fail here, as one line,
and cost only that submission its diagnosis: nothing in the comparison that follows may then
fail on a missing key or run long.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tito.curriculum.notebooks import AST_LOCK
from tito.errors import TitoError
from tito.sandbox import limits, npzwire


@dataclass
class Trace:
    """What one run recorded: per check, its events and error; arrays by key."""

    checks: list[dict]
    setup: list[dict]
    arrays: dict[str, np.ndarray]

    def value(self, event: dict, name: str):
        """The array recorded as `name` of `event`; None where the value was not numeric,
        NOT_KEPT where the run's budget was spent before it (nothing can be said there)."""
        key = event.get("arrays", {}).get(name)
        if key == DROPPED:
            return NOT_KEPT
        return self.arrays.get(key) if key else None


DROPPED = "-"  # the key trace_runner.py gives a value it did not keep (its budget was spent)
NOT_KEPT = object()  # Trace.value of such a value


def read_trace(data: bytes, max_bytes: int = limits.LOCAL_TRACE_BYTES) -> Trace:
    """A trace from the runner's .npz bytes: numbers only (tito/sandbox/npzwire.py), events as
    JSON."""
    try:
        arrays, record = npzwire.unpack(data, max_bytes, AST_LOCK,
                                        max_arrays=limits.WIRE_ARRAYS,
                                        max_depth=limits.WIRE_DEPTH)  # fmt: skip
        _check_record(record)
    except npzwire.WireError as err:
        raise TitoError(f"the diagnosis run sent back no usable trace: {err}") from None
    return Trace(record["checks"], record["setup"], arrays)


def _is(value, kind) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _spots(value, second=int) -> bool:
    """[[cell label, line], ...] (or None) as the runner writes places (`second`: str for
    [[cell label, function name]])."""
    return value is None or (_is(value, list) and len(value) <= 64 and all(
        spot is None or (_is(spot, list) and len(spot) == 2 and _is(spot[0], str)
                         and _is(spot[1], second)) for spot in value))  # fmt: skip


def _event_ok(event, count: int) -> bool:
    if not (_is(event, dict) and event.get("kind") in ("forward", "backward", "layer", "result")
            and _is(event.get("op"), str) and _is(event.get("arrays", {}), dict)):  # fmt: skip
        return False
    arrays = event.get("arrays", {})
    if not all(_is(k, str) and (v is None or _is(v, str)) for k, v in arrays.items()):
        return False
    if not (_spots(event.get("called")) and _spots([event.get("defined")])):
        return False
    layer, shapes = event.get("layer"), event.get("shapes", [])
    if not (layer is None or _is(layer, str)) or not _is(shapes, list):
        return False
    if event["kind"] == "backward":
        forward = event.get("forward")
        return (forward is None or (_is(forward, int) and 0 <= forward < count)) and _is(
            event.get("count"), int) and 0 <= event["count"] <= 64  # fmt: skip
    return True


def _check_record(record: dict) -> None:
    """The trace's record has the runner's shape, within bounds (a WireError if not), so that
    comparing it can neither fail on a missing key nor run long: a run of the submission wrote
    it, and a crafted one must cost only that submission its diagnosis."""
    checks, setup = record.get("checks"), record.get("setup")
    if not _is(checks, list) or not _is(setup, list) or len(setup) > 1000:
        raise npzwire.WireError("no list of checks")
    for check in checks:
        if not _is(check, dict) or not _is(check.get("label"), str):
            raise npzwire.WireError("a check without a label")
        events, results = check.get("events"), check.get("results")
        if not _is(events, list) or len(events) > limits.TRACE_EVENTS:
            raise npzwire.WireError(f"more than {limits.TRACE_EVENTS} events in a check")
        if not (check.get("error") is None or _is(check.get("error"), str)):
            raise npzwire.WireError("an error that is not text")
        if not _spots(check.get("where")) or not _is(results, dict):
            raise npzwire.WireError("a check's places or results are malformed")
        raised = check.get("raised_in")  # [cell label, the function an error left]
        if not (_spots([raised], str) and (raised is None or len(raised[1]) <= 200)):
            raise npzwire.WireError("a check's failing function is malformed")
        if not all(_is(i, int) and 0 <= i < len(events) for i in results.values()):
            raise npzwire.WireError("a check's results point at no event")
        for event in events:
            if not _event_ok(event, len(events)):
                raise npzwire.WireError("a malformed event")
        forwards = [i for i, e in enumerate(events) if e["kind"] == "forward"]
        if any(e["kind"] == "backward" and e.get("forward") is not None
               and e["forward"] not in forwards for e in events):  # fmt: skip
            raise npzwire.WireError("a backward of no forward")
    for error in setup:
        if not (_is(error, dict) and _is(error.get("cell"), str)
                and _is(error.get("error"), str) and _spots(error.get("where"))):  # fmt: skip
            raise npzwire.WireError("a malformed setup error")
