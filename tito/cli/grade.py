"""tito grade: instructor autograding with nbgrader (init, generate, autograde, feedback, ...)."""

from __future__ import annotations

import functools
import inspect
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tito.cli.console import console, fail, ok, safe
from tito.curriculum import paths
from tito.curriculum.catalog import find
from tito.errors import TitoError

# tito.grading.nbgrader imports nbgrader and nbformat (seconds): each command imports it when it
# runs,
# so `tito --help` and the other commands start fast.
if TYPE_CHECKING:
    from tito.grading import gradebook

DEFAULT_TIMEOUT = 60  # seconds a graded cell may run

app = typer.Typer(
    help="Grade student notebooks with nbgrader, offline. Each command works on --course DIR "
    "when given, else on the current folder when it holds an nbgrader_config.py, else on "
    "<project>/course.",
    no_args_is_help=True,
)

ModuleArg = Annotated[
    str, typer.Argument(metavar="MODULE", help="Module number or name, e.g. 13 or transformers.")
]
COURSE_HELP = (
    "The course folder. Default: the current folder when it holds an nbgrader_config.py "
    "(as with nbgrader), else <project>/course."
)
CourseOpt = Annotated[Path | None, typer.Option("--course", help=COURSE_HELP)]
StudentOpt = Annotated[str | None, typer.Option("--student", help="Only this student.")]


def _grading():
    """tito.grading.nbgrader, imported when a grade command runs; a clear error without nbgrader."""
    try:
        from tito.grading import nbgrader as grading
    except ModuleNotFoundError as err:
        raise TitoError(
            f"grading needs nbgrader, and {err.name} is not installed",
            hint='pip install -e ".[grade]" (nbgrader and ipykernel)',
        ) from None
    return grading


# generate, autograde and feedback also take nbgrader's own options, e.g.
# `tito grade autograde 13 --ExecutePreprocessor.timeout=120`, as `nbgrader autograde` does
NBGRADER_OPTIONS = {"allow_extra_args": True, "ignore_unknown_options": True}
NBGRADER_EPILOG = (
    "nbgrader's own options may follow, as --Class.trait=value "
    "(e.g. --ExecutePreprocessor.timeout=120); they win over nbgrader_config.py."
)


def _with_nbgrader_options(command):
    """Run a command with the nbgrader options left over on its command line applied."""
    signature = inspect.signature(command, eval_str=True)
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)

    @functools.wraps(command)
    def run(*args, ctx: typer.Context, **kwargs):
        _grading()
        from tito.grading.course import nbgrader_options

        with nbgrader_options(ctx.args):
            return command(*args, **kwargs)

    run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), context])
    return run


def _course(course: Path | None) -> Path:
    _grading()
    from tito.grading.course import find_course

    return find_course(course)


@app.command()
def init(
    course: Annotated[
        Path | None,
        typer.Argument(
            help="Course folder to create or update, e.g. `.` (default: as for --course).",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        int,
        typer.Option(
            help="Seconds a cell may run before it is stopped and scored 0 (tito's default; "
            "an ExecutePreprocessor.timeout in nbgrader_config.py wins)."
        ),
    ] = DEFAULT_TIMEOUT,
) -> None:
    """Create or update an nbgrader course folder.

    tito_config.py is rewritten, nbgrader_config.py written once (then it is yours), and source/
    converted from every course module.
    """
    _grading()
    from tito.grading.course import CONFIG_NAME, TITO_CONFIG, find_course, init_course

    folder = _course(course)
    result = init_course(folder, timeout=timeout)
    if result.kernel_installed:
        console.print(
            f"installed the python3 kernel for this Python in {safe(result.kernel_installed)}"
        )
    for path in result.written:
        console.print(f"wrote {safe(path.relative_to(folder))}")
    if result.missing:
        names = " ".join(f"{m.number:02d}" for m in result.missing)
        console.print(f"[note]not written yet in modules/, skipped: {names}[/note]")
    kept = "kept your" if result.config_kept else "wrote"
    console.print(f"{kept} {CONFIG_NAME}; rewrote {TITO_CONFIG}")
    ok(f"course folder {folder} (tito's cell timeout {timeout} s)")
    if folder == find_course(None):  # where the grade commands look without --course
        console.print("next: [name]tito grade generate N[/name]")
    else:
        where = shlex.quote(paths.shown(folder))
        console.print(
            f"next: [name]cd {escape(where)}[/name], then [name]tito grade generate N[/name] "
            f"(or, from here, [name]tito grade generate N --course {escape(where)}[/name])",
            soft_wrap=True,
        )


@app.command(context_settings=NBGRADER_OPTIONS, epilog=NBGRADER_EPILOG)
@_with_nbgrader_options
def generate(key: ModuleArg, course: CourseOpt = None) -> None:
    """Make the student version (release/NN_slug) and check it leaks no solution or hidden test."""
    grading = _grading()
    module = find(key)
    release = grading.generate(_course(course), module)
    ok(f"released {release}; no solution line or hidden test in it")


@app.command(context_settings=NBGRADER_OPTIONS, epilog=NBGRADER_EPILOG)
@_with_nbgrader_options
def autograde(
    key: ModuleArg,
    course: CourseOpt = None,
    student: Annotated[
        list[str] | None,
        typer.Option(
            "--student", help="Only students matching this name or glob (e.g. 'a*'); repeatable."
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="Grade share i of n (e.g. 2/3), for several graders sharing one gradebook."
        ),
    ] = None,
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
    from tito.grading import gradebook

    module = find(key)
    folder = _course(course)
    chosen = None
    if student or shard:
        found = grading.students(folder, module)
        chosen = grading.select_students(found, student, shard)
        if not chosen:
            ok(f"no student of {len(found)} falls in shard {shard}; nothing to grade")
            return
    outcomes = grading.autograde(folder, module, chosen, jobs=jobs, unsafe=unsafe)
    for outcome in outcomes:
        if outcome.ok:
            ok(f"graded {outcome.student}" + (f" ({outcome.message})" if outcome.message else ""))
        else:
            fail(f"{outcome.student}: {outcome.message}")
    graded = [o for o in outcomes if o.ok]
    if graded:
        _report(gradebook.scores(folder, module), module.name, only=[o.student for o in outcomes])
        _similar(folder, module, {o.student for o in graded})
    failed = len(outcomes) - len(graded)
    if failed:
        raise TitoError(
            f"{failed} of {len(outcomes)} submission(s) could not be graded; the rest were",
            hint="fix or replace those notebooks, then rerun with --student NAME",
        )


@app.command(context_settings=NBGRADER_OPTIONS, epilog=NBGRADER_EPILOG)
@_with_nbgrader_options
def feedback(
    key: ModuleArg,
    course: CourseOpt = None,
    student: StudentOpt = None,
    diagnose: Annotated[
        bool,
        typer.Option(
            "--diagnose",
            help="Add to each page, per check, the first operation whose numbers differ from the "
            "reference's, by how much and where (the submission's code runs in the sandbox).",
        ),
    ] = False,
    unsafe: Annotated[
        bool, typer.Option("--unsafe", help="With --diagnose: run without the sandbox.")
    ] = False,
) -> None:
    """Write HTML feedback for every autograded submission into feedback/."""
    grading = _grading()
    outcomes = grading.feedback(_course(course), find(key), student, diagnose, unsafe)
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
    """Write every module's grade of every student to a CSV file.

    nbgrader's columns, plus the status and the reason of students who could not be graded
    automatically.
    """
    _grading()
    from tito.grading import gradebook

    ok(f"grades written to {gradebook.export_csv(_course(course), to)}")


@app.command()
def report(key: ModuleArg, course: CourseOpt = None) -> None:
    """Scores per student and per graded cell of one module, for everyone who submitted."""
    _grading()
    from tito.grading import gradebook

    module = find(key)
    _report(gradebook.scores(_course(course), module), module.name)


def _report(scores: gradebook.Scores, title: str, only: list[str] | None = None) -> None:
    """A table that fits 80 columns: graded cells are numbered, with a legend below it, and
    the reason of every student who is not plainly graded is listed after it."""
    from tito.grading.gradebook import GRADED
    from tito.inert import terminal_text

    names = [s for s in scores.entries if only is None or s in only]
    table = Table(title=f"grades: {title}", title_justify="left")
    table.add_column("student", style="name", overflow="fold")
    for number, (_, points) in enumerate(scores.cells, 1):
        table.add_column(f"{number}\n/{points:g}", justify="right", no_wrap=True)
    table.add_column(f"total\n/{scores.max_total:g}", justify="right", no_wrap=True)
    table.add_column("status", overflow="fold")
    for name in names:
        entry = scores.entries[name]
        values = [f"{entry.cells.get(grade_id, 0):g}" for grade_id, _ in scores.cells]
        if entry.status != GRADED and not entry.cells:
            values = ["-"] * len(scores.cells)
        status = "" if entry.status == GRADED else entry.status
        shown, status = escape(terminal_text(name)), escape(terminal_text(status))
        table.add_row(shown, *values, f"{scores.total(name):g}", status)
    console.print(table)
    for number, (grade_id, points) in enumerate(scores.cells, 1):
        console.print(
            f"[note]{number}: {safe(grade_id)} ({points:g} points)[/note]", soft_wrap=True
        )
    for name in names:
        entry = scores.entries[name]
        if entry.reason and entry.status != GRADED:
            line = f"{name}: {entry.status}: {entry.reason}"
            console.print(escape(terminal_text(line)), soft_wrap=True)


@app.command("student-edition")
def student_edition(
    out: Annotated[
        Path,
        typer.Argument(
            help="Folder of the edition: a new one, or an earlier edition to update.",
            show_default=False,
        ),
    ],
    published: Annotated[
        str,
        typer.Option(
            help="Modules whose reference the edition holds, e.g. 01-07 or 1,3,5-6 "
            "(default: none; every other module has stubs only)."
        ),
    ] = "",
) -> None:
    """Write the repository students get, without the unpublished modules' solutions.

    Every unpublished module's solutions are replaced by their stubs (in modules/ and in
    tinytorch/), checked to hold none of their lines, and committed as a fresh git repository
    (or as a new commit on an earlier edition).
    """
    from tito.grading import edition

    made = edition.build(out, edition.parse_published(published))
    shown = ", ".join(f"{m.number:02d}" for m in made.published) or "none"
    verb = "updated" if made.updated else "wrote"
    ok(
        f"{verb} the student edition {made.folder}: {made.files} files, "
        f"{made.size / 1e6:.1f} MB, reference published for {shown}; commit {made.commit[:10]}"
    )
    console.print(
        "next: push it to the course's repository; students clone it and run "
        "[name]pip install -e .[/name]",
        soft_wrap=True,
    )


def _similar(folder: Path, module, students: set[str]) -> None:
    """After autograde: name the graded students whose code matches the reference or another
    submission above the threshold. The grades stay as they are; a person decides."""
    from tito.grading import similarity
    from tito.inert import terminal_text

    try:
        result = similarity.run(folder, module)
        similarity.save(folder, module, result)
    except Exception as err:  # the grades are recorded; a failed check must not hide them
        console.print(
            f"[note]similarity not checked ({type(err).__name__}: "
            f"{escape(terminal_text(str(err)))}); "
            f"see `tito grade similarity {module.number}`[/note]",
            soft_wrap=True,
        )
        return
    pairs = [p for p in result.flagged() if {p.a, p.b} & students]
    if not pairs:
        console.print(f"similarity: no pair at or above {result.settings.describe()}")
        return
    console.print(
        f"[bad]similar code[/bad] (at or above {result.settings.describe()}; grades unchanged, "
        f"a person decides; side by side: {safe(similarity.report_path(folder, module))}):",
        soft_wrap=True,
    )
    for pair in pairs:
        a, b = (escape(terminal_text(_shown_name(n))) for n in (pair.a, pair.b))
        console.print(f"  {a} and {b}: {pair.score:.2f}", soft_wrap=True)


def _shown_name(name: str) -> str:
    from tito.grading.similarity import REFERENCE

    return "the reference solution" if name == REFERENCE else name


@app.command()
def similarity(
    key: ModuleArg,
    course: CourseOpt = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            help="Earlier terms' submissions of this module (a course folder or any folder "
            "holding NN_slug/slug.ipynb notebooks), compared with this term's."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            help="Flag a pair when one side shares at least this share of its own code "
            "(default 0.35, or c.TitoSimilarity.threshold in nbgrader_config.py)."
        ),
    ] = None,
) -> None:
    """Compare every submission's solution code with every other's and with the reference.

    Also with --archive, after discounting what the release holds (starter code, given cells).
    Writes a ranked list here, the best match per student for grades.csv, and an HTML report
    side by side.
    """
    from tito.grading import similarity as check
    from tito.inert import terminal_text

    folder = _course(course)
    module = find(key)
    result = check.run(folder, module, archive, check.settings(folder, threshold))
    record, page = check.save(folder, module, result)
    table = Table(title=f"similarity: {module.name}", title_justify="left")
    for name, justify in (("#", "right"), ("score", "right"), ("a", "left"), ("b", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    table.add_column("shares a / b", justify="right", no_wrap=True)
    shown = result.pairs[: max(check.SHOWN, len(result.flagged()))]
    for number, pair in enumerate(shown, 1):
        style = "bad" if result.settings.flags(pair) else None
        a, b = (escape(terminal_text(_shown_name(n))) for n in (pair.a, pair.b))
        shares = f"{pair.share_a:.2f} / {pair.share_b:.2f}"
        table.add_row(str(number), f"{pair.score:.2f}", a, b, shares, style=style)
    console.print(table)
    if len(result.pairs) > len(shown):
        console.print(f"[note]{len(result.pairs) - len(shown)} lower pairs in the report[/note]")
    if result.too_short:
        names = ", ".join(escape(terminal_text(n)) for n in result.too_short)
        console.print(f"[note]too little own code to judge: {names}[/note]", soft_wrap=True)
    flagged = len(result.flagged())
    console.print(
        f"{len(result.texts)} notebooks, {flagged} pair(s) at or above "
        f"{result.settings.describe()}; report {safe(paths.shown(page))}; grades.csv takes the "
        f"best match per student from "
        f"{safe(paths.shown(record))} (tito grade export)",
        soft_wrap=True,
    )
