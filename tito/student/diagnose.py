"""`tito diagnose N`: the first operation where a student's module N parts from the reference.

Module N's checks run twice on the same seed, each in a fresh Python process that records every
operation through the engine's listeners (tinytorch/core/hooks.py, run by
tito/sandbox/trace_runner.py):
once over the student's notebook (their solution cells, with their own completed package under
it) and once over the reference. tito reads back only numbers and names (no pickle) and walks the
student's operations in the order they ran; the first whose output differs from the matching
reference operation while everything before it agreed is where the student's code went wrong.
Then the backward pass the same way, then the assert a check ended with, then the values each
check returned (tito/student/tracediff.py). A check whose assert fails is never "the same".

A finding names the layer, the operation and its method, forward or backward, which output, how
far off and where, a guess at the cause from the shape of the error (tito/student/divergence.py),
and the student's own cell and line. It never shows reference code; of a check's code, only the
failing assert's line as the student's own notebook holds it.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tito.curriculum import exporter, paths, staging
from tito.curriculum.catalog import CourseModule
from tito.curriculum.program import build_program
from tito.errors import TitoError
from tito.sandbox import limits, npzwire
from tito.student.tracediff import ASSERTED, STOPPED, Cells, Finding, first_difference
from tito.student.traces import Trace, read_trace

RUNNER = Path(__file__).parents[1] / "sandbox" / "trace_runner.py"
SEED = 0
TIMEOUT = 600.0


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
          timeout: float = TIMEOUT, over: str = "the reference") -> Trace:  # fmt: skip
    """Run the cells, then each check under the recorder, in a fresh `python -I` (`over`: whose
    code, for the error when it runs out of time)."""
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
                f"the checks over {over} did not finish in {timeout:g} s",
                hint="an endless loop? Fix it; or allow more time: --timeout SECONDS",
            ) from None
        found = Path(folder, "trace.npz")
        if done.returncode != 0 or not found.is_file():
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise TitoError(f"the diagnosis run failed: {last[:300]}", hint="rerun with --debug")
        return read_trace(found.read_bytes())


def _programs(module: CourseModule, notebook: Path):
    from tito.curriculum.notebooks import read_notebook, read_source

    source = read_source(paths.source(module))
    own = notebook.resolve() == paths.notebook(module).resolve()
    submission = read_notebook(notebook, module if own else None)
    theirs = build_program(source, submission)
    reference = build_program(source, source)
    solutions = _solution_cells(source, submission, theirs)
    checks = _check_cells(submission, reference)
    return theirs, reference, Cells(notebook.name, solutions, _known_lines(source), checks)


def diagnose(module: CourseModule, notebook: Path | None = None, seed: int = SEED,
             reference: Trace | None = None, timeout: float = TIMEOUT,
             on_run=None) -> Diagnosis:  # fmt: skip
    """Compare the student's module `module` with the reference, operation by operation. Each
    of the two runs may take `timeout` seconds; `on_run(whose code, timeout)` as each starts."""
    started = on_run or (lambda over, limit: None)

    notebook = notebook or paths.notebook(module)
    theirs, ref_program, cells = _programs(module, notebook)
    checks = [(grade_id, code) for grade_id, _, code, _ in ref_program.checks]
    diagnosis = Diagnosis(module, [grade_id for grade_id, _ in checks])
    if not checks:
        return diagnosis
    if reference is None:
        with tempfile.TemporaryDirectory(prefix="tito-reference-") as folder:
            _stage(module, Path(folder), ref_program)
            started("the reference", timeout)
            reference = trace(_cells(ref_program), checks, [folder], seed, timeout)
    over = f"your notebook {notebook.name}"
    with tempfile.TemporaryDirectory(prefix="tito-yours-") as folder:
        _stage(module, Path(folder), theirs, own=True)
        started(over, timeout)
        student = trace(_cells(theirs), checks, [folder], seed, timeout, over)
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
        _stage(module, work / "stage", program)
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
    solutions = _solution_cells(source, submission, program)
    checks = _check_cells(submission, program)
    cells = Cells("the submission", solutions, _known_lines(source), checks)
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


def _check_cells(submission, program) -> dict:
    """Each check's cell in the submission: its number, and the lines of the check as it ran
    where the submission's copy holds them ("" elsewhere: nothing it lacks is shown)."""
    ran = {grade_id: code.splitlines() for grade_id, _, code, _ in program.checks}
    found = {}
    for index, cell in enumerate(submission.cells):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in ran and grade_id not in found:
            text = cell.get("source", "")
            theirs = (text if isinstance(text, str) else "".join(text)).splitlines()
            lines = [
                a if k < len(theirs) and theirs[k] == a else "" for k, a in enumerate(ran[grade_id])
            ]
            found[grade_id] = (index + 1, lines)
    return found


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
            knock_on = finding.what.startswith(ASSERTED) or (
                finding.what.startswith(STOPPED) and not finding.place
            )
            if broken and knock_on:
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
        _stage(module, Path(folder), program)
        return trace(_cells(program), checks, [folder], seed)


def _stage(module: CourseModule, into: Path, program, own: bool = False) -> None:
    """The package a run's checks import, as grading stages it: the modules `module` requires
    (the student's completed code with `own`, else the reference's) and the program's own export
    of `module` (a given file may import it: module 18's accelerate imports its kernels)."""
    (staging.stage_own if own else staging.stage_reference)(module, into)
    try:
        files = exporter.render(program.merged, module, origin=f"module {module.name}")
    except TitoError:
        return  # its cells still run, and a cell that fails is named by the run
    exporter.write(files, into / "tinytorch")


def _cells(program) -> list[tuple[str, str]]:
    return [(label, code) for label, code, _ in program.cells]


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
