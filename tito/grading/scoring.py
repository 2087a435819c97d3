"""Score a submission check by check, so that only the student's own code decides the grade.

For each graded (locked test) cell of module N, a fresh sandboxed Python process runs

- the cells of the SOURCE notebook in order, except that each solution cell is the student's
  (matched by grade id); the student's other cells, and any edit to locked cells, are ignored;
- then the check itself, taken from the source (hidden tests included);

against a package staged for this submission: the reference export of the modules N requires
(and nothing of N or later modules), plus the student's own export of module N. Every graded
cell is a probe (`@graded`, tinytorch/checks.py): the process calls it on a seed the grader
picked and sends back only the numbers it returned (tito/sandbox/npzwire.py). The same programme
runs
once over the reference, on the same seed, in a sandbox of its own (`reference`, once per module
and autograde run). tito, which imports neither, compares the two (tito/grading/judge.py): the
numbers
decide, never what the student's process says about itself. Before anything runs, the
student's solution cells are read (not run) and refused when they reach for the grader's
machinery (tito/curriculum/refusals.py): defence in depth, not the wall.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tito.curriculum import exporter
from tito.curriculum.catalog import CourseModule
from tito.curriculum.program import (
    Program,
    build_program,
    cell_functions,
    declared,
    describe_cells,
    untouched,
)
from tito.errors import TitoError
from tito.grading import judge, verdict
from tito.sandbox import bwrap as sandbox
from tito.sandbox import limits, npzwire

RUNNER = Path(__file__).parents[1] / "sandbox" / "check_runner.py"


@dataclass
class Check:
    grade_id: str
    points: float
    passed: bool = False
    reason: str = ""  # why it failed, one line
    output: str = ""  # what the check printed (and its traceback), for the feedback
    seconds: float = 0.0
    grades: tuple[str, ...] = ()  # the solution cells it measures (`@graded(grades=...)`)
    alone: bool = False  # passed only with the reference's code in the other solution cells
    refused: bool = False  # not run: it measures a solution cell the static check refused
    culprit: str = ""  # the function whose result was wrong, when the probe could tell


@dataclass
class Scored:
    checks: list[Check]
    notes: list[str] = field(default_factory=list)  # one line each: setup errors, refusals
    seconds: float = 0.0
    seed: int | None = None  # the seed the probes ran on
    manual: str = ""  # why a person should look at it (a refused cell), "" when nothing

    def lost(self) -> list[str]:
        """One line per check that lost its points: the check, the function(s) it measures,
        and what differed."""
        return [f"{c.grade_id}: {c.reason}" for c in self.checks if not c.passed and c.reason]

    def summary(self) -> str:
        """One line: the first real cause of lost points, naming the cell. A plain cell of the
        course (a demo, "cell 27") that failed in the sandbox is never the cause: it is the
        course's own code, and it costs no point."""
        demo = [n for n in self.notes if n.split(":")[0].split(" ")[-1].isdigit()]
        lines = [n for n in self.notes if n not in demo] + self.lost()
        return lines[0] if lines else ""


# --- running the checks -------------------------------------------------------------------------


def build_job(program: Program, nonces: list[str], paths: list[str], timeout: float,
              seed: int = 0, parts: list[tuple[Program, list[str]]] = (),
              functions: dict[str, list[str]] | None = None) -> str:  # fmt: skip
    """The runner's job: every check of `program` over its cells and `paths`; then, for each
    further part (an isolated program and the search path of its own stage), its checks over
    its own cells and path (their nonces follow the first program's in `nonces`)."""
    checks = [
        {"label": grade_id, "code": code, "index": index}
        for grade_id, _, code, index in program.checks
    ]
    for other, path in parts:
        cells = [[label, text, index] for label, text, index in other.cells]
        checks += [
            {"label": grade_id, "code": code, "index": index, "cells": cells, "path": path}
            for grade_id, _, code, index in other.checks
        ]
    for check, nonce in zip(checks, nonces, strict=True):
        check["nonce"] = nonce
        check["functions"] = (functions or {}).get(check["label"], [])
    cells = [[label, text, index] for label, text, index in program.cells]
    rlimits = dict(limits.RLIMITS, RLIMIT_CPU=int(limits.check_seconds(timeout)) + 1)
    job = {
        "limits": rlimits,
        "output_bytes": limits.CHECK_OUTPUT_BYTES,
        "numbers_bytes": limits.NUMBERS_BYTES,
        "path": paths,
        "timeout": timeout,
        "cells": cells,
        "seed": seed,
        "solutions": sorted(_solutions(program.merged)),  # where a timeout is the student's
    }
    return json.dumps(dict(job, checks=checks))


def read_verdict(output: str, nonce: str, check: Check, timeout: float) -> list[str]:
    """Fill in `check` from what its process said (tito/grading/verdict.py: only lines with its
    nonce count); returns the errors of the cells before the check. The numbers decide later."""
    ending = verdict.read_ending(output, nonce)
    check.output = ending.output
    check.reason = verdict.process_reason(ending, timeout)
    check.passed = not check.reason
    return ending.notes


@dataclass
class Run:
    """One sandboxed run of every check of a program (then of each further part), and each
    check's nonce, in the job's order."""

    output: str
    nonces: list[str]
    seconds: float
    stopped: str
    export_error: str = ""


def _stage_export(program: Program, module: CourseModule, stage: Path, into: Path,
                  origin: str) -> str:  # fmt: skip
    """`stage` copied to `into` with the program's export of `module`; the error, or ""."""
    shutil.copytree(stage, into)
    try:
        files = exporter.render(program.merged, module, origin=origin)
        exporter.write(files, into / "tinytorch")
    except TitoError as err:
        return f"{origin}'s export failed: {err.message}"
    return ""


def run_checks(module: CourseModule, program: Program, stage: Path, timeout: float, seed: int,
               unsafe: bool = False, origin: str = "the submission",
               parts: list[Program] = ()) -> Run:  # fmt: skip
    """Every check of `program`, each in a fresh process of one sandbox, over `stage` (the
    reference of the modules `module` requires) with the program's own export of `module`;
    then the checks of each further program in `parts`, each over a stage of its own."""
    with tempfile.TemporaryDirectory(prefix="tito-grade-") as folder:
        work = Path(folder)
        export_error = _stage_export(program, module, stage, work / "stage", origin)
        mount = work if unsafe else Path(sandbox.MOUNT)
        numpy_dir = _numpy_dir()
        search = [str(mount / "stage"), numpy_dir]
        placed = []
        for number, part in enumerate(parts):
            name = f"part{number}"
            _stage_export(part, module, stage, work / name, origin)  # its error is the same
            placed.append((part, [str(mount / name), numpy_dir]))
        sandbox.stage_script(RUNNER.name, work)
        count = len(program.checks) + sum(len(part.checks) for part in parts)
        nonces = [secrets.token_hex(16) for _ in range(count)]
        job = build_job(program, nonces, search, timeout, seed, placed, program.functions)
        wall = limits.SLACK + count * (limits.check_seconds(timeout) + 0.5)
        run = sandbox.run_python(RUNNER.name, work, job, wall, unsafe=unsafe)
    stopped = run.ending() if run.stopped else ""
    return Run(run.output, nonces, run.seconds, stopped, export_error)


def culprit(mine: judge.Numbers, reason: str, known: list[str]) -> str:
    """The function a failed check's numbers point at, if the runner could tell and it is one
    the check's cells ask for (`known`): the one whose time ran out, the one a probe failed in,
    else the one that made the first value that differs."""
    stalled = re.match(r"timeout: stopped after \S+ s in (\S+) \(cell '", reason)
    if stalled:
        return stalled[1] if stalled[1] in known else ""
    for probe in mine.probes:
        if probe.get("error"):
            name = probe.get("blame")
            return name if isinstance(name, str) and name in known else ""
    key = reason[1:].split("'")[0] if reason.startswith("'") else ""
    for probe in mine.probes:
        made = probe.get("by")
        name = made.get(key) if isinstance(made, dict) else None
        if isinstance(name, str) and name in known:
            return name
    return ""


@dataclass
class Reference:
    """The reference's numbers for one module on one seed, computed once per autograde run and
    compared with every submission's: check grade id -> its numbers (with a problem when the
    reference itself gave none: then no submission can pass that check)."""

    seed: int
    numbers: dict[str, judge.Numbers]
    seconds: float = 0.0

    def failed(self) -> list[str]:
        """The checks whose probes raised in the reference's own run on this seed."""
        return [gid for gid, numbers in self.numbers.items()
                if any(probe.get("error") for probe in numbers.probes)]  # fmt: skip


def new_seed() -> int:
    """A seed no submission can know in advance."""
    return secrets.randbits(32)


NOT_A_PROBE = (
    "the graded cell is not a probe (`@graded` from tinytorch.checks), so it cannot be judged"
)


def reference(module: CourseModule, source: nbformat.NotebookNode, stage: Path, timeout: float,
              seed: int, unsafe: bool = False) -> Reference:  # fmt: skip
    """Run the reference's checks (its own export over `stage`) on `seed`, in the sandbox."""
    program = build_program(source, source)
    run = run_checks(module, program, stage, timeout, seed, unsafe, origin="the reference")
    if run.export_error:
        raise TitoError(run.export_error, hint=f"fix {module.source}, then `tito grade init`")
    numbers: dict[str, judge.Numbers] = {}
    for (grade_id, points, _, _), nonce in zip(program.checks, run.nonces, strict=True):
        check = Check(grade_id, points)
        read_verdict(run.output, nonce, check, timeout)
        sent = npzwire.from_lines(run.output, nonce, "numbers")
        if sent:
            numbers[grade_id] = judge.read_numbers(sent)
        elif check.passed:
            numbers[grade_id] = judge.Numbers(problem=NOT_A_PROBE)
        else:
            numbers[grade_id] = judge.Numbers(problem=f"the reference failed: {check.reason}")
    return Reference(seed, numbers, run.seconds)


SEED_TRIES = 5


def fair_reference(module: CourseModule, source: nbformat.NotebookNode, stage: Path,
                   timeout: float, unsafe: bool = False) -> Reference:  # fmt: skip
    """The reference's numbers on a fresh seed. A seed on which one of the reference's own
    probes fails (an assertion tighter than float32 allows at some input, say) would fail that
    check for the whole class, so another seed is drawn, up to SEED_TRIES times; after that the
    check fails for everyone with the reference's reason, which the instructor then sees."""
    for _ in range(SEED_TRIES):
        expected = reference(module, source, stage, timeout, new_seed(), unsafe)
        if not expected.failed():
            break
    return expected


def score(
    module: CourseModule,
    source: nbformat.NotebookNode,
    submission: nbformat.NotebookNode,
    reference_stage: Path,
    timeout: float,
    unsafe: bool = False,
    expected: Reference | None = None,
) -> Scored:
    """Run every check of one submission, each in a fresh process of one sandbox, and judge
    its probes' numbers against the reference's (`expected`, on its seed; computed here when
    not given)."""
    program = build_program(source, submission)
    if program.refusals:  # a refused cell never runs: the reference's code stands in its place
        own = tuple(cell for cell in _solutions(source) if cell not in program.refusals)
        refusals, first = program.refusals, program.refused
        program = build_program(source, submission, own=own)
        program.refusals, program.refused = refusals, first
    checks = [
        Check(grade_id, points, grades=declared(code))
        for grade_id, points, code, _ in program.checks
    ]
    scored = Scored(checks, list(program.notes))
    if program.refusals:
        _refuse(program, scored)
        if all(check.refused for check in checks):
            return _blamed(scored, source)
    runnable = [c for c, check in zip(program.checks, checks, strict=True) if not check.refused]
    program.checks, checks = runnable, [check for check in checks if not check.refused]
    if expected is None:
        expected = fair_reference(module, source, reference_stage, timeout, unsafe)
    scored.seed = expected.seed
    run = run_checks(module, program, reference_stage, timeout, expected.seed, unsafe)
    if run.export_error:
        scored.notes.append(run.export_error)
    scored.seconds = run.seconds
    for check, nonce in zip(checks, run.nonces, strict=True):
        for note in read_verdict(run.output, nonce, check, timeout):
            if f"cell {note}" not in scored.notes:
                scored.notes.append(f"cell {note}")
        # Only the numbers decide; what the process said (its verdict line) only explains.
        wanted = expected.numbers.get(check.grade_id) or judge.Numbers(problem=NOT_A_PROBE)
        mine = judge.read_numbers(npzwire.from_lines(run.output, nonce, "numbers"))
        said = check.reason
        decided = verdict.decide(check.points, judge.judge(mine, wanted), mine.problem,
                                 wanted.problem, said, run.stopped)  # fmt: skip
        check.passed, check.reason = decided.passed, decided.reason
        if not check.passed:
            check.culprit = culprit(mine, check.reason, program.functions[check.grade_id])
    isolate(module, source, submission, program, scored, expected, reference_stage, timeout,
            unsafe)  # fmt: skip
    return _blamed(scored, source)


def _blamed(scored: Scored, source: nbformat.NotebookNode) -> Scored:
    """Each lost check's reason, the function(s) it measures first."""
    for check in scored.checks:
        if not check.passed:
            check.reason = verdict.blame(check.reason, _measures(source, check))
    return scored


UNSHOWN = "the run did not show which function"


def _measures(source: nbformat.NotebookNode, check: Check) -> str:
    """What a lost check's reason starts with: the function whose result was wrong, when the
    probe's run could tell (with the other cells it measures, whose results that function may
    have used); else the cells it measures, saying the run did not show which of their functions
    (a refused cell, or cells of one function between them, are named as they are)."""
    functions = cell_functions(source, check.grades)
    cell = functions.get(check.culprit)
    if not cell and (check.refused or len(functions) <= 1):
        return describe_cells(source, check.grades)
    if not cell:
        cells = ", ".join(f"'{c}'" for c in check.grades)
        return f"cell{'s' if len(check.grades) > 1 else ''} {cells} ({UNSHOWN})"
    named = f"{check.culprit} (cell '{cell}')"
    others = tuple(other for other in check.grades if other != cell)
    return f"{named}, or what it uses of {describe_cells(source, others)}" if others else named


def _refuse(program: Program, scored: Scored) -> None:
    """Mark the checks that measure a refused cell (or declare no cell) not run, and say why a
    person should look: the static check is a deny-list and may refuse innocent code."""
    scored.notes.insert(0, f"not run: {program.refused}")
    lost = []
    for check in scored.checks:
        hit = [cell for cell in check.grades if cell in program.refusals]
        if hit or not check.grades:
            check.refused = True
            why = f"refused, {program.refusals[hit[0]]}" if hit else "a solution cell was refused"
            check.reason = f"not run: {why}"
            lost.append(check.grade_id)
    cells = ", ".join(f"'{cell}'" for cell in program.refusals)
    scored.manual = (
        f"refused solution cell(s) {cells}: {', '.join(lost) or 'no check'} scored 0, the other "
        "checks ran; read the code and grade it by hand if it is innocent"
    )


def _solutions(source: nbformat.NotebookNode) -> dict[str, str]:
    return {
        cell.metadata["nbgrader"]["grade_id"]: cell.source
        for cell in source.cells
        if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("solution")
    }


def isolate(module: CourseModule, source: nbformat.NotebookNode,
            submission: nbformat.NotebookNode, program: Program, scored: Scored,
            expected: Reference, stage: Path, timeout: float, unsafe: bool) -> None:  # fmt: skip
    """Each failed check again, with the reference's code in every solution cell the check does
    not declare: it passes when the student's declared cells alone match the reference. All
    such runs of one submission share one sandbox; what they print is never shown (it is the
    reference's code running). Not run again: a check that ran into a limit (verdict.hit_limit),
    one with a declared cell still the release's stub (alone it would run that stub and fail),
    one whose declared cells are the reference's text (it passes: alone it is the reference),
    and one whose other cells already are the reference's (alone is what already ran)."""
    reference_code = _solutions(source)
    theirs = {label: code for label, code, _ in program.cells if label in reference_code}
    same = {cell for cell, code in reference_code.items() if theirs.get(cell) == code}
    groups: dict[tuple[str, ...], list[Check]] = {}
    for check in scored.checks:
        wanted = expected.numbers.get(check.grade_id)
        if check.passed or check.refused or not check.grades or wanted is None or wanted.problem:
            continue
        if any(probe.get("error") for probe in wanted.probes):
            continue  # the reference itself failed on this seed: nothing can pass
        if verdict.hit_limit(check.reason):
            continue
        own = tuple(cell for cell in check.grades if cell in reference_code)
        if any(cell not in theirs or untouched(theirs[cell], reference_code[cell]) for cell in own):
            continue  # a declared cell holds no code of the student's: alone it fails too
        if own and all(cell in same for cell in own):
            _alone(check, "")  # alone, the check runs the reference itself
        elif not set(reference_code).difference(own).issubset(same):
            groups.setdefault(own, []).append(check)  # else alone is what already ran
    if not groups:
        return
    parts = []
    for own, group in groups.items():
        part = build_program(source, submission, own=own)
        part.checks = [c for c in part.checks if any(c[0] == g.grade_id for g in group)]
        parts.append(part)
    run = run_checks(module, parts[0], stage, timeout, expected.seed, unsafe, parts=parts[1:])
    scored.seconds += run.seconds
    nonces = iter(run.nonces)
    for part in parts:
        for grade_id, _, _, _ in part.checks:
            nonce = next(nonces)
            check = next(c for c in scored.checks if c.grade_id == grade_id)
            mine = judge.read_numbers(npzwire.from_lines(run.output, nonce, "numbers"))
            _alone(check, judge.judge(mine, expected.numbers[grade_id]))


def _alone(check: Check, judged: str) -> None:
    decided = verdict.alone(verdict.Verdict(check.passed, check.reason, 0.0), check.points, judged)
    check.alone = decided.passed and not check.passed
    if check.alone and check.output:
        check.output = (
            f"Full marks: this check measures cell(s) {', '.join(check.grades)}, which match "
            "with the reference's code in the other cells. Over your whole notebook it failed "
            "(below), because of a cell it does not measure.\n" + check.output
        )
    check.passed, check.reason = decided.passed, decided.reason


def _numpy_dir() -> str:
    import numpy

    return str(Path(numpy.__file__).resolve().parent.parent)
