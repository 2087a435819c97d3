"""tito grade: instructor autograding with nbgrader (init, generate, autograde, feedback, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tito.catalog import find
from tito.console import console, fail, ok
from tito.errors import TitoError

# tito.grading imports nbgrader and nbformat (seconds): each command imports it when it runs,
# so `tito --help` and the other commands start fast.
if TYPE_CHECKING:
    from tito import grading

DEFAULT_TIMEOUT = 60  # seconds a graded cell may run

app = typer.Typer(help="Grade student notebooks with nbgrader, offline.", no_args_is_help=True)

ModuleArg = Annotated[str, typer.Argument(help="Module number or name, e.g. 13 or transformers.")]
CourseOpt = Annotated[
    Path | None,
    typer.Option("--course", help="The course folder (default: <project>/course)."),
]
StudentOpt = Annotated[str | None, typer.Option("--student", help="Only this student.")]


def _grading():
    """tito.grading, imported when a grade command runs; a clear error without nbgrader."""
    try:
        from tito import grading
    except ModuleNotFoundError as err:
        raise TitoError(
            f"grading needs nbgrader, and {err.name} is not installed",
            hint='pip install -e ".[grade]" (nbgrader and ipykernel)',
        ) from None
    return grading


def _course(course: Path | None) -> Path:
    grading = _grading()
    return (course or grading.default_course()).resolve()


@app.command()
def init(
    course: Annotated[
        Path | None, typer.Argument(help="Course folder to create (default: <project>/course).")
    ] = None,
    timeout: Annotated[
        int, typer.Option(help="Seconds a cell may run before it is stopped and scored 0.")
    ] = DEFAULT_TIMEOUT,
) -> None:
    """Create an nbgrader course folder and convert every course module into source/."""
    grading = _grading()
    folder = _course(course)
    result = grading.init_course(folder, timeout=timeout)
    if result.kernel_installed:
        console.print(f"installed the python3 kernel for this Python in {result.kernel_installed}")
    for path in result.written:
        console.print(f"wrote {path.relative_to(folder)}")
    if result.missing:
        names = " ".join(f"{m.number:02d}" for m in result.missing)
        console.print(f"[note]not written yet in modules/, skipped: {names}[/note]")
    ok(f"course folder {folder} (cell timeout {timeout} s)")
    console.print("next: [name]tito grade generate N[/name]")


@app.command()
def generate(key: ModuleArg, course: CourseOpt = None) -> None:
    """Make the student version (release/NN_slug) and check it leaks no solution or hidden test."""
    grading = _grading()
    module = find(key)
    release = grading.generate(_course(course), module)
    ok(f"released {release}; no solution line or hidden test in it")


@app.command()
def autograde(
    key: ModuleArg,
    course: CourseOpt = None,
    student: StudentOpt = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Students graded at once.")] = 1,
    unsafe: Annotated[
        bool,
        typer.Option(
            "--unsafe",
            help="Grade without the bubblewrap sandbox (the submission sees this machine).",
        ),
    ] = False,
) -> None:
    """Grade every submission in submitted/<student>/NN_slug/, each check in a sandbox."""
    grading = _grading()
    module = find(key)
    folder = _course(course)
    outcomes = grading.autograde(folder, module, student, jobs=jobs, unsafe=unsafe)
    for outcome in outcomes:
        if outcome.ok:
            ok(f"graded {outcome.student}" + (f" ({outcome.message})" if outcome.message else ""))
        else:
            fail(f"{outcome.student}: {outcome.message}")
    graded = [o for o in outcomes if o.ok]
    if graded:
        console.print(_table(grading.scores(folder, module), module.name))
    failed = len(outcomes) - len(graded)
    if failed:
        raise TitoError(
            f"{failed} of {len(outcomes)} submission(s) could not be graded; the rest were",
            hint="fix or replace those notebooks, then rerun with --student NAME",
        )


@app.command()
def feedback(key: ModuleArg, course: CourseOpt = None, student: StudentOpt = None) -> None:
    """Write HTML feedback for every autograded submission into feedback/."""
    grading = _grading()
    outcomes = grading.feedback(_course(course), find(key), student)
    for outcome in outcomes:
        if outcome.ok:
            ok(f"{outcome.student}: {outcome.message}")
        else:
            fail(f"{outcome.student}: {outcome.message}")
    if not all(o.ok for o in outcomes):
        raise TitoError("feedback failed for some students", hint="rerun with --debug")


@app.command()
def export(
    course: CourseOpt = None,
    to: Annotated[
        Path | None, typer.Option(help="CSV file (default: <course>/grades.csv).")
    ] = None,
) -> None:
    """Write every grade in the gradebook to a CSV file."""
    grading = _grading()
    ok(f"grades written to {grading.export_csv(_course(course), to)}")


@app.command()
def report(key: ModuleArg, course: CourseOpt = None) -> None:
    """Scores per student and per graded cell, from the gradebook."""
    grading = _grading()
    module = find(key)
    console.print(_table(grading.scores(_course(course), module), module.name))


def _table(scores: grading.Scores, title: str) -> Table:
    table = Table(title=f"grades: {title}")
    table.add_column("student", style="name")
    for grade_id, points in scores.cells:
        table.add_column(f"{grade_id}\n/{points:g}", justify="right")
    table.add_column(f"total\n/{scores.max_total:g}", justify="right")
    for student, cells in scores.rows.items():
        values = [f"{cells.get(grade_id, 0):g}" for grade_id, _ in scores.cells]
        table.add_row(student, *values, f"{scores.total(student):g}")
    return table
