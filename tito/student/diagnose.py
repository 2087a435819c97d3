"""`tito diagnose N`: the first operation where a student's module N parts from the reference.

Module N's checks run twice on the same seed, each in a fresh Python process that records every
operation through the engine's listeners (tinytorch/core/hooks.py, run by
tito/sandbox/trace_runner.py):
once over the student's notebook (their solution cells, with their own completed package under
it) and once over the reference. tito reads back only numbers and names (no pickle) and walks the
student's operations in the order they ran; the first whose output differs from the matching
reference operation while everything before it agreed is where the student's code went wrong.
Then the backward pass the same way, then the values each check returned.

A finding names the layer, the operation and its method, forward or backward, which output, how
far off and where, a guess at the cause from the shape of the error (tito/student/divergence.py),
and the student's own cell and line. It never shows reference code or a check's code.
"""

from __future__ import annotations

import difflib
import json
import re
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tito.curriculum import paths, staging
from tito.curriculum.catalog import CourseModule
from tito.curriculum.program import build_program
from tito.errors import TitoError
from tito.sandbox import limits, npzwire
from tito.student.divergence import Difference, compare
from tito.student.traces import NOT_KEPT, Trace, read_trace

ENGINE_HINT = (
    "every gradient computed before it matched, so they are passed on or summed wrongly: each "
    "node's gradients are added up (+=, not =) and each node runs once, after all its users"
)
RUNNER = Path(__file__).parents[1] / "sandbox" / "trace_runner.py"
STOPPED = "the check stopped with an error"
SEED = 0
TIMEOUT = 600.0


@dataclass
class Finding:
    check: str  # the graded cell's id, e.g. test-layernorm
    what: str  # "Sub.forward (in layer LayerNorm)" or "the check's value 'dx'"
    summary: str  # the numbers
    hint: str
    place: str = ""  # "transformers.ipynb, cell 12, line 5: return x.T ..." (the student's)


@dataclass
class Diagnosis:
    module: CourseModule
    checks: list[str]  # every check compared
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # setup cells of the student's that failed

    @property
    def clean(self) -> bool:
        return not self.findings


# --- running ------------------------------------------------------------------------------------


def trace(cells: list[tuple[str, str]], checks: list[tuple[str, str]], path: list[str], seed: int,
          timeout: float = TIMEOUT) -> Trace:  # fmt: skip
    """Run the cells, then each check under the recorder, in a fresh `python -I`."""
    with tempfile.TemporaryDirectory(prefix="tito-diagnose-") as folder:
        job = {"path": path, "cells": cells, "checks": checks, "seed": seed, "out": folder,
               "max_bytes": limits.LOCAL_TRACE_NUMBERS_BYTES,
               "max_arrays": limits.WIRE_ARRAYS}  # fmt: skip
        try:
            done = subprocess.run(
                [sys.executable, "-I", str(RUNNER)],
                input=json.dumps(job),
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=folder,
            )
        except subprocess.TimeoutExpired:
            raise TitoError(
                f"the checks did not finish in {timeout:g} s", hint="look for an endless loop"
            ) from None
        found = Path(folder, "trace.npz")
        if done.returncode != 0 or not found.is_file():
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise TitoError(f"the diagnosis run failed: {last[:300]}", hint="rerun with --debug")
        return read_trace(found.read_bytes())


@dataclass
class Cells:
    """The student's solution cells: label -> (their notebook's cell number, their code)."""

    notebook: str
    solutions: dict[str, tuple[int, list[str]]]
    known: frozenset[str] = frozenset()  # the source's own solution lines, stripped (never shown)

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


def _programs(module: CourseModule, notebook: Path):
    from tito.curriculum.notebooks import read_notebook, read_source

    source = read_source(paths.source(module))
    own = notebook.resolve() == paths.notebook(module).resolve()
    submission = read_notebook(notebook, module if own else None)
    theirs = build_program(source, submission)
    reference = build_program(source, source)
    solutions = _solution_cells(source, submission, theirs)
    return theirs, reference, Cells(notebook.name, solutions, _known_lines(source))


def diagnose(module: CourseModule, notebook: Path | None = None, seed: int = SEED,
             reference: Trace | None = None) -> Diagnosis:  # fmt: skip
    """Compare the student's module `module` with the reference, operation by operation."""

    notebook = notebook or paths.notebook(module)
    theirs, ref_program, cells = _programs(module, notebook)
    checks = [(grade_id, code) for grade_id, _, code, _ in ref_program.checks]
    diagnosis = Diagnosis(module, [grade_id for grade_id, _ in checks])
    if not checks:
        return diagnosis
    if reference is None:
        with tempfile.TemporaryDirectory(prefix="tito-reference-") as folder:
            staging.stage_reference(module, Path(folder))
            reference = trace(_cells(ref_program), checks, [folder], seed)
    with tempfile.TemporaryDirectory(prefix="tito-yours-") as folder:
        staging.stage_own(module, Path(folder))
        student = trace(_cells(theirs), checks, [folder], seed)
    return explain(module, student, cells, reference)


def submission_trace(module: CourseModule, submission, seed: int = SEED, timeout: float = 120.0,
                     unsafe: bool = False) -> tuple[Trace, Cells]:  # fmt: skip
    """A submitted notebook's trace, made in the grading sandbox (instructor feedback): the
    source's cells with the student's solution cells, over the reference of the modules it
    requires. The trace comes back as numbers and names only; tito imports none of it."""
    from tito.curriculum.notebooks import read_source
    from tito.sandbox import bwrap as sandbox

    source = read_source(paths.source(module))
    program = build_program(source, submission)
    checks = [(grade_id, code) for grade_id, _, code, _ in program.checks]
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="tito-diagnose-") as folder:
        work = Path(folder)
        staging.stage_reference(module, work / "stage")
        sandbox.stage_script(RUNNER.name, work)
        mount = work if unsafe else Path(sandbox.MOUNT)
        job = {
            "path": [str(mount / "stage"), str(Path(np.__file__).resolve().parent.parent)],
            "cells": _cells(program),
            "checks": checks,
            "seed": seed,
            "nonce": nonce,
            "max_bytes": limits.TRACE_NUMBERS_BYTES,
            "max_arrays": limits.WIRE_ARRAYS,
        }
        run = sandbox.run_python(
            RUNNER.name,
            work,
            json.dumps(job),
            timeout,
            unsafe=unsafe,
            output_bytes=2 * limits.TRACE_BYTES,
        )  # base64 and what cells print
    marks = npzwire.from_lines(run.output, nonce, "trace")
    if len(marks) != 1:
        raise TitoError("the submission's diagnosis run ended without a trace")
    trace = read_trace(marks[0], limits.TRACE_BYTES)
    cells = Cells(
        "the submission", _solution_cells(source, submission, program), _known_lines(source)
    )
    return trace, cells


def _known_lines(source) -> frozenset[str]:
    """Every line of the source's solution cells, stripped: to narrow a place, never shown."""
    return frozenset(
        line.strip()
        for cell in source.cells
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution")
        for line in cell.source.splitlines()
    )


def _solution_cells(source, submission, program) -> dict:
    numbers = {}
    for index, cell in enumerate(submission.cells):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id and grade_id not in numbers:
            text = cell.get("source", "")
            numbers[grade_id] = (index + 1, (text if isinstance(text, str) else "".join(text)))
    return {
        label: (numbers[label][0], numbers[label][1].splitlines())
        for label, _, index in program.cells
        if source.cells[index].get("metadata", {}).get("nbgrader", {}).get("solution")
        and label in numbers
    }


def explain(module: CourseModule, student: Trace, cells: Cells, reference: Trace) -> Diagnosis:
    """Compare two traces of module `module`'s checks, check by check."""
    diagnosis = Diagnosis(module, [c["label"] for c in reference.checks])
    if [c["label"] for c in student.checks] != diagnosis.checks:
        raise TitoError("the diagnosis run sent back other checks than the module's")
    broken = []  # the student's cells that failed, as the notes name them
    for error in student.setup:
        place = cells.place(error["where"])
        if place or error["cell"] in cells.solutions:
            number = cells.solutions.get(error["cell"], (None,))[0]
            broken.append(f"{cells.notebook}, cell {number}" if number else place)
            diagnosis.notes.append(f"{error['error']}, at {place or 'cell ' + error['cell']}")
    for mine, ref in zip(student.checks, reference.checks, strict=True):
        finding = first_difference(mine, ref, student, reference, cells)
        if finding is not None:
            if broken and finding.what.startswith(STOPPED) and not finding.place:
                finding.hint = f"a knock-on of your failed cell ({broken[0]}): fix that first"
            diagnosis.findings.append(finding)
    return diagnosis


def reference_trace(module: CourseModule, seed: int = SEED) -> Trace:
    """The reference's trace alone (tests compare many student notebooks against one)."""
    from tito.curriculum.notebooks import read_source

    source = read_source(paths.source(module))
    program = build_program(source, source)
    checks = [(grade_id, code) for grade_id, _, code, _ in program.checks]
    with tempfile.TemporaryDirectory(prefix="tito-reference-") as folder:
        staging.stage_reference(module, Path(folder))
        return trace(_cells(program), checks, [folder], seed)


def _cells(program) -> list[tuple[str, str]]:
    return [(label, code) for label, code, _ in program.cells]


# --- comparing ----------------------------------------------------------------------------------


def _compare(yours, expected) -> Difference | None:
    """compare() for recorded values, which are missing when an output was not numeric."""
    if expected is None or expected is NOT_KEPT or yours is NOT_KEPT:
        return None  # nothing to compare: not numeric in the reference, or not kept
    if yours is None:
        return Difference("no numeric value where the reference has one", "return the array")
    return compare(yours, expected)


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
        found = _compare(student.value(event, "out"), reference.value(ref_event, "out"))
        if found is not None:
            found.hint = _input_hint(event, ref_event, student, reference) or found.hint
            place = cells.place([event.get("defined")]) or cells.place(event.get("called"))
            return Finding(check, f"{_label(event, 'forward')}", found.summary, found.hint, place)
    layers = [e for e in events if e["kind"] == "layer"]
    ref_layers = [e for e in ref_events if e["kind"] == "layer"]
    layer_pairs = _align(layers, ref_layers)
    for i, event in enumerate(layers):
        if i in layer_pairs:
            found = _compare(
                student.value(event, "out"), reference.value(ref_layers[layer_pairs[i]], "out")
            )
            if found is not None:
                where = cells.place(event.get("called")) or cells.place([event.get("defined")])
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
    for name, index in ref["results"].items():
        ours = mine["results"].get(name)
        if ours is None:
            continue
        found = _compare(
            student.value(events[ours], "out"), reference.value(ref_events[index], "out")
        )
        if found is not None:
            return Finding(check, f"the value '{name}' the check reads", found.summary,
                           found.hint + _engine_note(name, compared))  # fmt: skip
    return None


def _stopped(check: str, mine: dict, cells: Cells) -> Finding:
    """A check that ended with an error, named by the function of the student's it was in."""
    place, raised = cells.place(mine["where"]), mine.get("raised_in")
    own = f" in {raised[1]}" if raised and raised[0] in cells.solutions else ""
    return Finding(check, STOPPED + own, mine["error"], _error_hint(mine["error"], place), place)


def _input_hint(event, ref_event, student: Trace, reference: Trace) -> str:
    """When an operation's own inputs already differ, the step before it (which the reference
    made and the student did not, or the other way round) is the cause: say how they differ."""
    for k in range(len(event.get("shapes", []))):
        found = _compare(student.value(event, f"in{k}"), reference.value(ref_event, f"in{k}"))
        if found is not None:
            return f"its input {k + 1} already differs ({found.summary}): {found.hint}"
    return ""


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
            found = _compare(np.zeros_like(expected) if yours is None else yours, expected)
            if found is not None:
                place = cells.place([event.get("defined")]) or cells.place(forward.get("called"))
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


__all__ = [
    "Diagnosis",
    "Finding",
    "diagnose",
    "explain",
    "reference_trace",
    "submission_trace",
]


# --- instructor feedback ------------------------------------------------------------------------


def feedback_section(result: Diagnosis, lost: set[str] | None = None) -> str:
    """The diagnosis as an HTML fragment for a feedback page: per check, the first operation
    whose numbers differ, by how much, where in the submission, and a likely cause. Every
    text is escaped; it holds numbers and the student's own lines, never reference or test code.
    With `lost` (the checks that cost points), only those are listed: a check with full marks
    measured the student's declared code alone and found it right, so a difference its full
    run shows comes from another function, already named under the check that lost points."""
    from html import escape

    by_check = {f.check: f for f in result.findings}
    items = []
    for note in result.notes:
        items.append(f"<li><b>a cell of yours failed</b>: {escape(note)}</li>")
    for check in result.checks:
        if lost is not None and check not in lost:
            continue
        f = by_check.get(check)
        if f is None and lost is not None:
            items.append(f"<li><code>{escape(check)}</code>: no operation differs beyond the "
                         "trace's tolerance; the check's own comparison, in its reason above, "
                         "is stricter</li>")  # fmt: skip
            continue
        if f is None:
            items.append(f"<li><code>{escape(check)}</code>: every operation matches</li>")
            continue
        where = f"<br>at <code>{escape(f.place)}</code>" if f.place else ""
        items.append(
            f"<li><code>{escape(check)}</code>: {escape(f.what)}<br>{escape(f.summary)}{where}"
            f"<br>likely: {escape(f.hint)}</li>"
        )
    if lost is not None and not items:
        items.append("<li>every check has full marks</li>")
    which = "Each graded check" if lost is None else "Each check that lost points"
    return (
        '<div class="tito-diagnosis"><h2>Where your numbers first differ from the reference</h2>'
        f"<p>{which} run on the same random inputs over your code and the reference, "
        "operation by operation (tito diagnose).</p><ul>" + "".join(items) + "</ul></div>"
    )


def submission_feedback(module: CourseModule, submission, reference: Trace | None = None,
                        unsafe: bool = False, lost: set[str] | None = None) -> str:  # fmt: skip
    """The feedback fragment of one submitted notebook, its trace made in the grading sandbox;
    `lost`: the checks that cost points (the others are left out)."""
    student, cells = submission_trace(module, submission, unsafe=unsafe)
    found = explain(module, student, cells, reference or reference_trace(module))
    return feedback_section(found, lost)
