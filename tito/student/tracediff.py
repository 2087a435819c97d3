"""Where one check's run over the student's code first parts from its run over the reference:
the first operation forward whose output differs while everything before it agreed, else the
first backward whose incoming gradient matched and outgoing ones did not, else the error or the
assert the check ended with, else the first value the check reads. Read from two traces
(tito/student/traces.py); the words come from tito/student/divergence.py. tito/student/diagnose.py
runs the checks and reports per check.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import numpy as np

from tito.student.divergence import Difference, compare
from tito.student.traces import NOT_KEPT, Trace

ENGINE_HINT = (
    "every gradient computed before it matched, so they are passed on or summed wrongly: each "
    "node's gradients are added up (+=, not =) and each node runs once, after all its users"
)
STOPPED = "the check stopped with an error"
ASSERTED = "an assert of the check does not hold"
ASSERT_HINT = (
    "no operation recorded differs from the reference, so this assert checks something done "
    "outside them (in plain numpy: an update or a scale applied in place, a view or a copy, a "
    "dtype, an attribute, a gradient left alone): read it and what the lesson says about it"
)


@dataclass
class Finding:
    check: str  # the graded cell's id, e.g. test-layernorm
    what: str  # "Sub.forward (in layer LayerNorm)" or "the check's value 'dx'"
    summary: str  # the numbers
    hint: str
    place: str = ""  # "transformers.ipynb, cell 12, line 5: return x.T ..." (the student's)


@dataclass
class Cells:
    """The student's solution cells: label -> (their notebook's cell number, their code)."""

    notebook: str
    solutions: dict[str, tuple[int, list[str]]]
    known: frozenset[str] = frozenset()  # the source's own solution lines, stripped (never shown)
    checks: dict[str, tuple[int, list[str]]] = field(default_factory=dict)  # graded cells, theirs

    def place(self, spots) -> str:
        """The innermost of [[label, line], ...] that is in one of the student's cells. A
        function's `def` line is narrowed to the first line of its body that the reference does
        not have, when there is one: the likeliest line of the slip (no reference line is shown)."""
        for spot in spots or []:
            if not spot:
                continue
            label, line = spot
            if label in self.solutions:
                number, lines = self.solutions[label]
                line = self._narrow(lines, line)
                text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
                return f"{self.notebook}, cell {number}, line {line}: {text}"
        return ""

    def check_place(self, spots) -> str:
        """The innermost of [[label, line], ...] in a check cell: its cell in the student's
        notebook, with the line's text where their copy of the cell holds the line that ran."""
        for label, line in (spot for spot in spots or [] if spot):
            if label in self.checks:
                number, lines = self.checks[label]
                text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
                return f"{self.notebook}, cell {number}, line {line}" + (f": {text}" * bool(text))
        return ""

    def _narrow(self, lines: list[str], line: int) -> int:
        if not (0 < line <= len(lines)) or not lines[line - 1].lstrip().startswith("def "):
            return line
        indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
        for number in range(line + 1, len(lines) + 1):
            text = lines[number - 1]
            if text.strip() and len(text) - len(text.lstrip()) <= indent:
                break  # the end of the function
            stripped = text.strip()
            if stripped and not stripped.startswith("#") and stripped not in self.known:
                return number
        return line


def _compare(yours, expected, about: str = "") -> Difference | None:
    """compare() for recorded values, which are missing when an output was not numeric
    (`about`: words naming the operation, for the guess at a cause)."""
    if expected is None or expected is NOT_KEPT or yours is NOT_KEPT:
        return None  # nothing to compare: not numeric in the reference, or not kept
    if yours is None:
        return Difference("no numeric value where the reference has one", "return the array")
    return compare(yours, expected, about=about)


def _about(event: dict, place: str) -> str:
    """The words that name an operation: its class, its layer and the student's line."""
    return f"{event['op']} {event.get('layer') or ''} {place}"


def _align(mine: list[dict], ref: list[dict]) -> dict[int, int]:
    """Student event position -> reference event position, for runs of the same operations."""
    ops = [e["op"] for e in mine], [e["op"] for e in ref]
    matcher = difflib.SequenceMatcher(None, *ops, autojunk=False)
    pairs = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            pairs[block.a + k] = block.b + k
    return pairs


def _label(event: dict, method: str) -> str:
    layer = f" (in layer {event['layer']})" if event.get("layer") else ""
    return f"{event['op']}.{method}{layer}"


def first_difference(mine: dict, ref: dict, student: Trace, reference: Trace,
                     cells: Cells) -> Finding | None:  # fmt: skip
    """The first operation of one check whose numbers part from the reference's."""
    check = ref["label"]
    events, ref_events = mine["events"], ref["events"]
    forwards = [e for e in events if e["kind"] == "forward"]
    ref_forwards = [e for e in ref_events if e["kind"] == "forward"]
    pairs = _align(forwards, ref_forwards)
    for i, event in enumerate(forwards):
        if i not in pairs:
            continue
        ref_event = ref_forwards[pairs[i]]
        place = cells.place([event.get("defined")]) or cells.place(event.get("called"))
        about = _about(event, place)
        found = _compare(student.value(event, "out"), reference.value(ref_event, "out"), about)
        if found is not None:
            differs = _differing_input(event, ref_event, student, reference, about)
            what, runs = _label(event, "forward"), _runs_before(forwards[:i], pairs, event)
            if differs and runs:  # the same line gave the reference's numbers before
                what += f", first different at its call {runs + 1} from the same line"
                return Finding(check, what, found.summary, _built_up(event, runs, differs), place)
            hint = found.hint
            if differs:
                hint = f"its input {differs[0] + 1} already differs ({differs[1].summary}): "
                hint += differs[1].hint
            return Finding(check, what, found.summary, hint, place)
    layers = [e for e in events if e["kind"] == "layer"]
    ref_layers = [e for e in ref_events if e["kind"] == "layer"]
    layer_pairs = _align(layers, ref_layers)
    for i, event in enumerate(layers):
        if i in layer_pairs:
            where = cells.place(event.get("called")) or cells.place([event.get("defined")])
            found = _compare(
                student.value(event, "out"),
                reference.value(ref_layers[layer_pairs[i]], "out"),
                _about(event, where),
            )
            if found is not None:
                return Finding(
                    check, f"output of layer {event['op']}", found.summary, found.hint, where
                )
    failed = mine["error"] and not ref["error"]
    if failed and not mine["error"].startswith("AssertionError"):  # their code raised
        return _stopped(check, mine, cells)
    finding, compared = _backward_difference(
        check, events, ref_events, pairs, student, reference, cells
    )
    if finding is not None:
        return finding
    if failed:  # the check's own assertion, with no operation to blame before it
        return _stopped(check, mine, cells)
    if ref["error"]:  # never "same as the reference" for a check that fails
        return Finding(check, "the check fails on the reference solution too", ref["error"],
                       "nothing can be compared, as the course's own code fails here: tell "
                       "your instructor")  # fmt: skip
    for name, index in ref["results"].items():
        ours = mine["results"].get(name)
        if ours is None:
            continue
        found = _compare(
            student.value(events[ours], "out"),
            reference.value(ref_events[index], "out"),
            f"{name} {check}",
        )
        if found is not None:
            return Finding(check, f"the value '{name}' the check reads", found.summary,
                           found.hint + _engine_note(name, compared))  # fmt: skip
    return None


def _stopped(check: str, mine: dict, cells: Cells) -> Finding:
    """A check that ended with an error, named by the function of the student's it was in."""
    place, raised = cells.place(mine["where"]), mine.get("raised_in")
    asserted = cells.check_place(mine["where"])
    if not place and asserted and mine["error"].startswith("AssertionError"):
        return Finding(check, ASSERTED, mine["error"], ASSERT_HINT, asserted)
    own = f" in {raised[1]}" if raised and raised[0] in cells.solutions else ""
    return Finding(check, STOPPED + own, mine["error"], _error_hint(mine["error"], place), place)


def _runs_before(earlier: list[dict], pairs: dict, event: dict) -> int:
    """How many times the line that called `event` called the same operation before, each
    time with the reference's numbers (every forward before the first difference matched)."""
    site = (event.get("called") or [None])[0]
    if site is None:
        return 0
    return sum(1 for j, e in enumerate(earlier) if j in pairs and e["op"] == event["op"]
               and (e.get("called") or [None])[0] == site)  # fmt: skip


def _built_up(event: dict, runs: int, differs: tuple) -> str:
    """The hint for a line that gave the reference's numbers before and now gets other inputs,
    though no operation before it differs: something carried between the runs of a loop."""
    times = "once" if runs == 1 else f"{runs} times"
    return (
        f"this line called {event['op']} {times} before with the reference's numbers; now its "
        f"input {differs[0] + 1} differs ({differs[1].summary}) though no operation before it "
        "does, so the difference builds up over the steps of a loop, in what one step hands the "
        "next (a learning rate or schedule, gradients not zeroed, an update or a clip not done "
        "in place), not on this line"
    )


def _differing_input(event, ref_event, student: Trace, reference: Trace, about: str = ""):
    """(k, how) of the first input of an operation that already differs from the reference's:
    then the step before it (which the reference made and the student did not, or the other
    way round) is the cause. None when every input matches."""
    for k in range(len(event.get("shapes", []))):
        found = _compare(
            student.value(event, f"in{k}"), reference.value(ref_event, f"in{k}"), about
        )
        if found is not None:
            return k, found
    return None


def _engine_note(name: str, compared: int) -> str:
    """For a gradient the check read: the engine is the suspect only if some backward matched."""
    if not (name.startswith("d") or "grad" in name):
        return ""
    if compared:
        return (
            "; every operation's own gradient matched, so look at how gradients are passed on "
            "and summed (the backward engine, or a gradient overwritten instead of accumulated)"
        )
    return "; no operation's backward was recorded, so check each backward this value comes from"


def _backward_difference(check, events, ref_events, pairs, student, reference, cells):
    """The first backward whose incoming gradient matched but whose outgoing ones did not."""
    # event list position of each forward -> its position among forwards (and back, for ref)
    forward_index = {p: n for n, p in enumerate(i for i, e in enumerate(events)
                                                if e["kind"] == "forward")}  # fmt: skip
    ref_forward_index = dict(enumerate(i for i, e in enumerate(ref_events)
                                       if e["kind"] == "forward"))  # fmt: skip
    ref_backward = {e["forward"]: e for e in ref_events if e["kind"] == "backward"}
    clean = True  # every backward so far had a reference to compare with
    compared = 0  # backwards compared with the reference's
    for event in events:
        if event["kind"] != "backward":
            continue
        matched = pairs.get(forward_index.get(event.get("forward"), -1))
        ref_event = (
            ref_backward.get(ref_forward_index.get(matched)) if matched is not None else None
        )
        if ref_event is None:
            clean = False
            continue
        forward = events[event["forward"]]
        compared += 1
        arriving = _compare(student.value(event, "grad"), reference.value(ref_event, "grad"))
        if arriving is not None and clean:  # every gradient computed before this one matched
            place = cells.place(event.get("called")) or cells.place(forward.get("called"))
            return Finding(check, f"the gradient reaching {_label(forward, 'backward')}",
                           arriving.summary, ENGINE_HINT, place), compared  # fmt: skip
        if arriving is not None:
            continue  # a consequence of an earlier difference
        for k in range(min(event["count"], ref_event["count"])):
            yours, expected = student.value(event, f"g{k}"), reference.value(ref_event, f"g{k}")
            if expected is None or expected is NOT_KEPT or yours is NOT_KEPT:
                continue
            place = cells.place([event.get("defined")]) or cells.place(forward.get("called"))
            found = _compare(np.zeros_like(expected) if yours is None else yours, expected,
                             _about(forward, place))  # fmt: skip
            if found is not None:
                which = f"gradient for input {k + 1} of {event['count']}"
                return Finding(check, f"{_label(forward, 'backward')}, {which}", found.summary,
                               found.hint, place), compared  # fmt: skip
    return None, compared


SHAPE_WORDS = re.compile(r"shape|dimension|broadcast|cannot reshape|size \d+ is different", re.I)


def _error_hint(error: str, place: str) -> str:
    if error.startswith("NotImplementedError"):
        return "this part is not written yet"
    if error.startswith(("ValueError", "ShapeError", "IndexError")) and SHAPE_WORDS.search(error):
        return "a shape does not fit: print the shapes of each step"
    if place:
        return "the error was raised in your code, at the line shown"
    return "the error was raised outside your cells, on values your code gave it"


__all__ = ["ASSERTED", "STOPPED", "Cells", "Finding", "first_difference"]
