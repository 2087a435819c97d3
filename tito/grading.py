"""Instructor grading on top of nbgrader: course folder, release, autograde, feedback, gradebook.

The course folder is a plain nbgrader course (source/, release/, submitted/, autograded/,
feedback/, gradebook.db) whose nbgrader_config.py is written by `tito grade init`, so the
instructor can also run `nbgrader ...` in it directly and get the same behaviour.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
import warnings
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from fnmatch import fnmatchcase as fnmatch
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from sqlalchemy.exc import SAWarning
from traitlets.config import Config
from traitlets.config.loader import KVArgParseConfigLoader, PyFileConfigLoader

from tito import paths
from tito.catalog import MODULES, CourseModule
from tito.errors import TitoError
from tito.notebooks import read_notebook, read_source, secret_lines

COURSE_ID = "tinytorch"
CONFIG_NAME = "nbgrader_config.py"
TITO_CONFIG = "tito_config.py"
KERNEL_NAME = "python3"
MARKER = "# Written by `tito grade init`"  # heads tito_config.py (and the old nbgrader_config.py)

# tito's settings, rewritten by every `tito grade init`. They are set on nbconvert's
# ExecutePreprocessor, the parent of nbgrader's Execute, so that whatever the instructor sets
# (c.Execute.timeout or c.ExecutePreprocessor.timeout in nbgrader_config.py, or
# --ExecutePreprocessor.timeout=N on nbgrader's command line) wins over them.
TITO_CONFIG_TEMPLATE = """{marker}, which rewrites it each time: do not edit.
# Your own settings go into nbgrader_config.py, which loads this file first.
import os

from tito.grading import autograde_preprocessors

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "{course_id}"
c.Exchange.root = os.path.join(c.CourseDirectory.root, "exchange")  # unused offline; kept local
# Every graded cell runs in a fresh {kernel} kernel; a cell that runs longer is stopped and
# scored 0, and grading goes on with the next cell and the next student.
c.ExecutePreprocessor.kernel_name = "{kernel}"
c.ExecutePreprocessor.timeout = {timeout}
# A graded cell fails only when it raises: warnings written to stderr do not cost points.
c.Autograde.autograde_preprocessors = autograde_preprocessors()
c.ClearSolutions.code_stub = {{"python": "# TODO: your code here\\nraise NotImplementedError()"}}
"""

# The instructor's file: written once, never rewritten by tito.
CONFIG_TEMPLATE = """# nbgrader's configuration of this course. It is yours: `tito grade init` wrote
# it once and never rewrites it. tito's settings come first, from {tito_config};
# whatever you set below wins over them.
import os

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
here = os.path.dirname(os.path.abspath(__file__))
load_subconfig(os.path.join(here, "{tito_config}"))  # noqa: F821 - provided by traitlets too

# Examples (uncomment to use):
# c.ExecutePreprocessor.timeout = 300                  # seconds a graded cell may run
# c.CourseDirectory.db_url = "postgresql+psycopg://grader@db-host/tinytorch"  # shared gradebook
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


def find_course(course: Path | None = None) -> Path:
    """The course folder a command works on: --course when given (relative to the current
    folder), else the current folder when it holds an nbgrader_config.py (as nbgrader does),
    else <project>/course."""
    if course is not None:
        return course.resolve()
    here = Path.cwd()
    if (here / CONFIG_NAME).is_file():
        return here.resolve()
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
    config_kept: bool = False
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
    """Write tito_config.py (tito's settings, rewritten each time), nbgrader_config.py (the
    instructor's, written only when absent) and fill source/ from modules/."""
    if timeout < 1:
        raise TitoError(f"timeout must be at least 1 second, got {timeout}")
    course = course.resolve()
    if course.exists() and not course.is_dir():
        raise TitoError(f"{course} is a file", hint="choose a folder for the course")
    config = course / CONFIG_NAME
    # an nbgrader_config.py from an older tito carries the marker and no instructor settings
    keep = config.exists() and MARKER not in config.read_text()
    if keep and TITO_CONFIG not in config.read_text():
        raise TitoError(
            f"{config} does not load {TITO_CONFIG}, so tito's settings would be ignored",
            hint=f'add `load_subconfig("{course / TITO_CONFIG}")` right after `c = get_config()`'
            " in it, then run init again",
        )
    course.mkdir(parents=True, exist_ok=True)
    paths.write_atomic(
        course / TITO_CONFIG,
        TITO_CONFIG_TEMPLATE.format(
            marker=MARKER, course_id=COURSE_ID, kernel=KERNEL_NAME, timeout=timeout
        ),
    )
    if not keep:
        paths.write_atomic(config, CONFIG_TEMPLATE.format(tito_config=TITO_CONFIG))
    result = InitResult(config=config, config_kept=keep, kernel_installed=ensure_kernel())
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


def _tools_on_path() -> None:
    """nbgrader runs `alembic` as a subprocess. Without an activated venv (venv/bin/tito, pipx,
    cron) its folder is not on PATH: put the script folders of this Python first (the venv's,
    then, for a venv made with --system-site-packages, its base Python's, then the user's)."""
    folders = [
        Path(sys.executable).parent,
        Path(sysconfig.get_path("scripts")),
        Path(sysconfig.get_path("scripts", vars={"base": sys.base_prefix})),
        Path(sysconfig.get_path("scripts", f"{os.name}_user")),
    ]
    entries = os.environ.get("PATH", "").split(os.pathsep)
    ours = [str(f) for f in dict.fromkeys(folders) if (f / "alembic").exists()]
    os.environ["PATH"] = os.pathsep.join([*ours, *(e for e in entries if e and e not in ours)])


# nbgrader options given on tito's command line, for the command that is running
_command_line: ContextVar[Config | None] = ContextVar("nbgrader_options", default=None)


@contextmanager
def nbgrader_options(args: list[str]):
    """Apply nbgrader's own command-line options (--Class.trait=value, as `nbgrader` takes
    them) while a tito command runs; like nbgrader's, they win over both config files."""
    for arg in args:
        if not re.fullmatch(r"--[A-Za-z_]\w*(\.\w+)+=.*", arg):
            raise TitoError(
                f"no such option: {arg}",
                hint="nbgrader's options are written --Class.trait=value, "
                "e.g. --ExecutePreprocessor.timeout=120",
            )
    token = _command_line.set(KVArgParseConfigLoader(argv=args).load_config())
    try:
        yield
    finally:
        _command_line.reset(token)


def course_config(course: Path) -> Config:
    """The course's nbgrader configuration as nbgrader reads it: tito's settings, then the
    instructor's nbgrader_config.py, then nbgrader options given on the command line."""
    for name in (CONFIG_NAME, TITO_CONFIG):
        if not (course / name).is_file():
            raise TitoError(
                f"{course} is not a tito course folder (no {name})",
                hint=f"run `tito grade init {course}` first, or cd into your course folder",
            )
    config = PyFileConfigLoader(CONFIG_NAME, path=str(course)).load_config()
    config.merge(_command_line.get() or Config())
    return config


def execute_settings(course: Path) -> tuple[int, str]:
    """(timeout, kernel_name) a graded cell runs with, as nbgrader's Execute resolves them."""
    execute = Execute(config=course_config(course))
    return execute.timeout, execute.kernel_name


def _api(course: Path) -> NbGraderAPI:
    config = course_config(course)
    _tools_on_path()
    # nbgrader's gradebook trips SQLAlchemy session warnings that mean nothing to an instructor
    warnings.filterwarnings("ignore", category=SAWarning)
    config.NbGraderAPI.log_level = "WARN"
    return NbGraderAPI(config=config)


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
    api = _api(course)
    source = course / "source" / assignment_id(module) / notebook_file(module)
    if not source.exists():
        raise TitoError(
            f"module {module.name} has no source notebook in {course / 'source'}",
            hint=f"run `tito grade init {course}` (it converts every module in modules/)",
        )
    name = assignment_id(module)
    with api.gradebook as gb:
        known = name in {a.name for a in gb.assignments}
    result = api.generate_assignment(name, force=True, create=True)
    release = course / "release" / name
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
    ok: bool
    message: str = ""


def students(
    course: Path, module: CourseModule, student: str | list[str] | None = None
) -> list[str]:
    """Students with a submission folder for this module (nbgrader's submitted/<s>/<NN_slug>)."""
    submitted = course / "submitted"
    name = assignment_id(module)
    found = sorted(p.parent.name for p in submitted.glob(f"*/{name}") if p.is_dir())
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
    """The students matching any of the glob patterns (all when none), then this grader's
    share: shard "i/n" takes the names whose CRC-32 is i-1 modulo n, a split that every
    grader computes alike and that stays put when a late submission arrives."""
    chosen = [s for s in found if not patterns or any(fnmatch(s, p) for p in patterns)]
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
    if not (course / "release" / assignment_id(module)).exists():
        raise TitoError(
            f"module {module.name} has not been released",
            hint=f"run `tito grade generate {module.number}` first",
        )


def autograde(
    course: Path, module: CourseModule, student: str | list[str] | None = None
) -> list[Outcome]:
    """Autograde each student on their own, so one broken submission never stops the rest."""
    course = course.resolve()
    api = _api(course)
    _check_released(course, module)
    outcomes = []
    for name in students(course, module, student):
        notebook = course / "submitted" / name / assignment_id(module) / notebook_file(module)
        try:
            nb = read_notebook(notebook)
            nbformat.validate(nb)
        except TitoError as err:
            outcomes.append(Outcome(name, False, err.message))
            continue
        except nbformat.ValidationError as err:
            first = str(err).splitlines()[0]
            outcomes.append(Outcome(name, False, f"{notebook} is not a valid notebook: {first}"))
            continue
        result = api.autograde(assignment_id(module), name, force=True, create=True)
        outcomes.append(
            Outcome(name, result["success"], "" if result["success"] else _failure(result))
        )
    return outcomes


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
