"""The course folder tito grades in: where it is, how `tito grade init` makes it, the nbgrader
configuration it holds, and its layout.

The folder is a plain nbgrader course (source/, release/, submitted/, autograded/, feedback/,
and the gradebook) with two configuration files: tito_config.py, tito's settings, rewritten by
every init, and nbgrader_config.py, the instructor's, written once; it loads tito's first, so
whatever the instructor sets wins, and `nbgrader ...` run in the folder behaves like tito. Where
each stage's notebooks live is spelled out here only ("the layout"), as is tito's own record of
autograde attempts (tito/outcomes/).
"""

from __future__ import annotations

import glob
import os
import re
import sys
import sysconfig
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from nbgrader.preprocessors import Execute
from sqlalchemy.exc import SAWarning
from traitlets.config import Config
from traitlets.config.loader import KVArgParseConfigLoader, PyFileConfigLoader

from tito.curriculum import paths
from tito.curriculum.catalog import MODULES, CourseModule
from tito.curriculum.notebooks import read_source
from tito.errors import TitoError

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

from tito.grading.nbgrader import autograde_preprocessors

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "{course_id}"
c.Exchange.root = os.path.join(c.CourseDirectory.root, "exchange")  # unused offline; kept local
# `tito grade autograde` runs each graded cell in its sandbox (docs/instructor.md), not in a
# kernel; a cell that runs longer than the timeout is stopped and scored 0, and grading goes on
# with the next cell and the next student. The kernel is the one nbgrader's own commands use
# (e.g. `nbgrader autograde` run by hand in this folder).
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


# --- the layout: where each stage of a module's notebooks lives (nbgrader's, spelled out once) ---

SOURCE, RELEASE, SUBMITTED, AUTOGRADED, FEEDBACK = (
    "source", "release", "submitted", "autograded", "feedback"
)  # fmt: skip
PER_STUDENT = (SUBMITTED, AUTOGRADED, FEEDBACK)  # these hold one folder per student


def assignment_id(module: CourseModule) -> str:
    return module.name


def notebook_file(module: CourseModule) -> str:
    return f"{module.slug}.ipynb"


def feedback_file(module: CourseModule) -> str:
    return f"{module.slug}.html"


def stage_root(course: Path, stage: str) -> Path:
    """<course>/<stage>, e.g. <course>/submitted."""
    if stage not in (SOURCE, RELEASE, *PER_STUDENT):
        raise ValueError(f"no stage {stage!r} in a course folder")
    return course / stage


def assignment_dir(
    course: Path, stage: str, module: CourseModule, student: str | None = None
) -> Path:
    """<course>/<stage>/[<student>/]<NN_slug>: a student's folder in submitted/, autograded/ and
    feedback/, the instructor's in source/ and release/."""
    if (stage in PER_STUDENT) != (student is not None):
        raise ValueError(f"{stage}/ {'needs' if stage in PER_STUDENT else 'takes no'} student")
    parts = [student] if student is not None else []
    return stage_root(course, stage).joinpath(*parts, assignment_id(module))


def notebook_path(
    course: Path, stage: str, module: CourseModule, student: str | None = None
) -> Path:
    """The module's notebook in one stage (and one student's folder)."""
    return assignment_dir(course, stage, module, student) / notebook_file(module)


def feedback_path(course: Path, module: CourseModule, student: str) -> Path:
    return assignment_dir(course, FEEDBACK, module, student) / feedback_file(module)


def outcomes_dir(course: Path, module: CourseModule) -> Path:
    """tito's record of each student's latest autograde attempt (tito/grading/gradebook.py)."""
    return course / "tito" / "outcomes" / assignment_id(module)


STUDENT_NAME_CHARS = 128  # nbgrader's gradebook keeps a student id in 128 characters


def check_student_name(name: str) -> None:
    """A TitoError naming the folder and the fix when nbgrader cannot hold `name` literally as
    a student id. Pattern characters (`*`, `?`, `[`) are fine: every path tito gives nbgrader
    goes through `literal` first."""
    problem = ""
    if name != name.strip():
        problem = "begins or ends with a space, which nbgrader strips (it would grade the folder "
        problem += f"{name.strip()!r} instead)"
    elif any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        problem = "holds control characters"
    elif len(name) > STUDENT_NAME_CHARS:
        problem = f"is longer than the {STUDENT_NAME_CHARS} characters a student id may have"
    if problem:
        shown = repr(name if len(name) <= 60 else name[:60] + "...")
        raise TitoError(
            f"the student folder {shown} under submitted/ {problem}: rename it to the "
            "student's id and grade again; every other student is graded"
        )


def literal(name: str) -> str:
    """`name` as nbgrader's student_id, which nbgrader reads as a file glob: escaped so that it
    matches the one folder of that name (a folder named `*` is not everyone)."""
    return glob.escape(name)


def students_in(course: Path, stage: str, module: CourseModule) -> list[str]:
    """Students with a folder for this module in a per-student stage, sorted."""
    root = stage_root(course, stage)
    return sorted(p.parent.name for p in root.glob(f"*/{assignment_id(module)}") if p.is_dir())


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
        target = notebook_path(course, SOURCE, module)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(read_source(source), target)
        result.written.append(target)
    return result


def tools_on_path() -> None:
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
    apis = _command_apis.set({})
    try:
        yield
    finally:
        _command_apis.reset(apis)
        _command_line.reset(token)


# the NbGraderAPI of each course folder, built once per tito command (nbgrader_api)
_command_apis: ContextVar[dict | None] = ContextVar("nbgrader_apis", default=None)


def command_apis() -> dict | None:
    """The running command's NbGraderAPIs by course folder (None outside a tito command)."""
    return _command_apis.get()


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


def nbgrader_api(course: Path) -> NbGraderAPI:
    """The course's NbGraderAPI; one per course folder for the whole of a tito command."""
    built = command_apis()
    if built is not None and course in built:
        return built[course]
    config = course_config(course)
    tools_on_path()
    # nbgrader's gradebook trips SQLAlchemy session warnings that mean nothing to an instructor
    warnings.filterwarnings("ignore", category=SAWarning)
    config.NbGraderAPI.log_level = "WARN"
    api = NbGraderAPI(config=config)
    if built is not None:
        built[course] = api
    return api
