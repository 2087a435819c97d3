"""tito module: list, status, open, complete, export, test, reset."""

from __future__ import annotations

import shutil
import subprocess
from typing import Annotated

import typer
from rich.table import Table

from tito.cli.console import console, fail, ok, safe
from tito.cli.report import LiveProgress, show_run
from tito.curriculum import paths
from tito.curriculum.catalog import MODULES, complete_key, find, number_ranges
from tito.errors import TitoError
from tito.student import progress
from tito.student.runner import run_tests

# tito.student.lifecycle imports jupytext and nbformat (seconds): the commands that need it import
# it
# when they run, so `tito --help` and `tito milestone` start fast.

app = typer.Typer(help="Work through the course modules.", no_args_is_help=True)

ModuleArg = Annotated[
    str,
    typer.Argument(
        metavar="MODULE",
        help="Module number or name, e.g. 13 or transformers.",
        autocompletion=complete_key,
    ),
]


def _table(show_counts: bool) -> Table:
    from tito.student import lifecycle

    done = progress.load()
    table = Table(title="tinytorch modules")
    table.add_column("#", justify="right")
    table.add_column("module", style="name")
    table.add_column("title")
    table.add_column("state")
    table.add_column("needs")
    if show_counts:
        table.add_column("tests")
    colours = {"complete": "green", "in progress": "yellow", "not started": "dim"}
    for m in MODULES:
        st = lifecycle.state(m, done)
        row = [
            f"{m.number:02d}",
            m.slug,
            m.title,
            f"[{colours[st]}]{st}[/]",
            number_ranges(m.requires) or "-",
        ]
        if show_counts:
            rec = done.get(m.number)
            row.append(f"{rec.passed} passed" if rec else "")
        table.add_row(*row)
    return table


@app.command("list")
def list_modules() -> None:
    """Every module with its title, state and prerequisites."""
    console.print(_table(show_counts=False))


@app.command()
def status() -> None:
    """Your progress: state and recorded test counts per module, and what to do next."""
    from tito.student import lifecycle

    console.print(_table(show_counts=True))
    done = progress.load()
    console.print(f"{len(done)} of {len(MODULES)} modules complete.")
    _replaced(done)
    pending = [m for m in MODULES if m.number not in done]
    if not pending:
        return
    first = pending[0]
    started = [m for m in pending[1:] if lifecycle.state(m, done) == "in progress"]
    if started:
        names = ", ".join(f"{m.number:02d} {m.slug}" for m in started)
        console.print(f"also in progress: {names}")
    if lifecycle.state(first, done) == "in progress":
        rel = safe(paths.shown(paths.notebook(first)))
        step = f"[name]tito module complete {first.number}[/name]"
        console.print(f"next: fill in the TODOs of {rel}, then {step}", soft_wrap=True)
    else:
        console.print(f"next: [name]tito module open {first.number}[/name]")


TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help="Stop the tests after this many seconds (default 900, or TITO_TEST_TIMEOUT).",
        show_default=False,
    ),
]


@app.command("open")
def open_(
    key: ModuleArg,
    jupyter: Annotated[bool, typer.Option(help="Start JupyterLab on the notebook.")] = False,
) -> None:
    """Create your working notebook for a module (never overwrites an existing one)."""
    from tito.student import lifecycle

    m = find(key)
    path, created = lifecycle.open_module(m)
    rel = paths.shown(path)
    if created:
        ok(f"created {rel} with the solutions removed; fill in each TODO")
    else:
        console.print(f"{safe(rel)} already exists; it was left as it is.")
    # `jupyter` alone may exist without JupyterLab (it then prints its own usage, exit 0)
    exe = shutil.which("jupyter-lab")
    if jupyter and exe is None:  # the error comes before any next step is suggested
        raise TitoError(
            "JupyterLab is not installed, so --jupyter cannot open the notebook",
            hint=f"pip install jupyterlab, or open {rel} in any notebook editor",
        )
    if exe is None:
        console.print(
            f"edit it in any notebook editor; JupyterLab is not installed here "
            f"([name]pip install jupyterlab[/name], then [name]jupyter lab {safe(rel)}[/name])",
            soft_wrap=True,
        )
    elif not jupyter:
        console.print(
            f"edit it in JupyterLab: [name]jupyter lab {safe(rel)}[/name] (or --jupyter)",
            soft_wrap=True,
        )
    console.print(f"when it is done: [name]tito module complete {m.number}[/name]")
    if jupyter:
        code = subprocess.run([exe, str(path)], check=False).returncode
        if code:
            raise TitoError(f"JupyterLab stopped with exit code {code}", exit_code=code)


def run_live(label: str, call):
    """Run `call(on_event)` with a live progress line; returns what it returns."""
    with LiveProgress(label) as live:
        return call(live)


@app.command()
def complete(
    key: Annotated[
        str | None,
        typer.Argument(
            metavar="MODULE",
            help="Module number or name, e.g. 13 or transformers.",
            autocompletion=complete_key,
        ),
    ] = None,
    timeout: TimeoutOption = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="After a course update (`git pull`): complete every module you completed "
            "before, again, from your notebooks, in course order.",
        ),
    ] = False,
) -> None:
    """Export your notebook into tinytorch, run the module's tests, record progress on a pass."""
    if again == (key is not None):
        raise TitoError(
            "give a module or --again",
            hint="`tito module complete 3`, or `tito module complete --again` after `git pull`",
        )
    if again:
        complete_again(timeout)
        return
    complete_one(find(key), timeout)


def complete_again(timeout: float | None) -> None:
    """Complete every completed module again, in course order; at the first that fails, forget
    it and the ones after it (the package then holds the course's code for them), and say so."""
    chosen = [m for m in MODULES if m.number in progress.load()]
    if not chosen:
        raise TitoError("no module is complete yet", hint="`tito module complete 1` first")
    for number, m in enumerate(chosen):
        try:
            complete_one(m, timeout)
        except typer.Exit:
            rest = chosen[number:]
            forgotten = progress.without(*(r.number for r in rest))
            if forgotten is not None:
                paths.write_all({progress.file(): forgotten})
            names = " ".join(f"{r.number:02d}" for r in rest)
            many = len(rest) > 1
            fail(
                f"module{'s' if many else ''} {names} {'are' if many else 'is'} no longer "
                f"complete: tinytorch/ holds the course's code for {'them' if many else 'it'} "
                f"until {'they pass' if many else 'it passes'} again",
                hint=f"fix {paths.shown(paths.notebook(m))}, then `tito module complete "
                f"{m.number}` and each of the others in order",
            )
            raise
    ok(f"{len(chosen)} module(s) complete again with your code")


def complete_one(m, timeout: float | None) -> None:
    from tito.student import lifecycle

    try:
        run, recorded, saved = run_live(
            f"module {m.name}", lambda live: lifecycle.complete(m, timeout=timeout, on_event=live)
        )
    except KeyboardInterrupt:
        raise TitoError(
            "interrupted; tinytorch/ and your progress are as they were", exit_code=130
        ) from None
    show_run(run, f"module {m.name}")
    if not recorded:
        fix = (
            f"find what is slow or endless in {paths.shown(paths.notebook(m))}"
            if run is not None and run.timed_out
            else f"fix the failing parts in {paths.shown(paths.notebook(m))}"
        )
        fail(
            "not recorded; the package keeps its previous code for this module",
            hint=f"{fix} and run `tito module complete {m.number}` again",
        )
        raise typer.Exit(1)
    _say_saved(saved)
    ok(f"module {m.name} complete; your code is now in tinytorch")


@app.command()
def export(
    key: Annotated[
        str | None, typer.Argument(metavar="MODULE", help="Module number or name.")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Export every module.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Only compare tinytorch/ with modules/ (with your own export for completed "
            "modules); fail on drift.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Also replace the code of completed modules (they become not complete).",
        ),
    ] = False,
) -> None:
    """Rebuild tinytorch/ from the reference sources in modules/.

    Completed modules keep your own code unless --force is given.
    """
    from tito.student import lifecycle

    if (key is None) == (not all_):
        raise TitoError("give a module or --all", hint="tito module export 13, or --all")
    chosen = list(MODULES) if all_ else [find(key)]
    done = progress.load()
    if check:
        diffs = [d for m in chosen for d in lifecycle.check_reference(m, done)]
        diffs += lifecycle.check_course_map()
        for d in diffs:
            console.print(d, markup=False)
        if diffs:
            raise TitoError(
                f"tinytorch/ differs from what it should hold in {len(diffs)} file(s)",
                hint="tito writes tinytorch/, so edit your notebook in workspace/ instead: "
                "`tito module complete N` installs a completed module's code again, "
                "`tito module export --all` the reference of the others (a hand edit is backed "
                "up first); course maintainers edit modules/",
            )
        mine = sum(m.number in done for m in chosen)
        note = f" ({mine} with your completed code)" if mine else ""
        ok(f"tinytorch/ matches modules/ for {len(chosen)} module(s){note}")
        return
    if all_ and not force:
        kept = [m for m in chosen if m.number in done]
        chosen = [m for m in chosen if m.number not in done]
        if kept:
            names = ", ".join(f"{m.number:02d} {m.slug}" for m in kept)
            console.print(f"kept your completed code for {names} (--force replaces it)")
            for m in kept:  # kept as the package holds it, which may not be what was completed
                if lifecycle.check_reference(m, done):
                    console.print(
                        f"{m.number:02d} {m.slug}: tinytorch/ no longer holds the code you "
                        f"completed (edited by hand?); `tito module complete {m.number}` installs "
                        "it again, backing the edit up first",
                        soft_wrap=True,
                    )
    written, saved = lifecycle.export_reference(chosen, force=force)
    for path in written:
        console.print(f"wrote {safe(paths.shown(path))}")
    if not written:
        console.print("tinytorch/ already holds that code: nothing to write")
    _say_saved(saved)
    undone = [m for m in chosen if m.number in done] if force else []
    if undone:
        names = ", ".join(f"{m.number:02d} {m.slug}" for m in undone)
        again = " ".join(f"`tito module complete {m.number}`" for m in undone)
        console.print(
            f"{names}: the reference code replaced yours, so "
            f"{'it is' if len(undone) == 1 else 'they are'} no longer complete; "
            f"{again} installs your notebook's code again",
            soft_wrap=True,
        )


@app.command("test")
def test_module(key: ModuleArg, timeout: TimeoutOption = None) -> None:
    """Run a module's tests against the current tinytorch package (same as `tito test`)."""
    from tito.student import lifecycle

    m = find(key)
    locate = lifecycle.installed_map(m)
    run = run_live(
        f"tests {m.name}",
        lambda live: run_tests(m, timeout=timeout, on_event=live, locate=locate),
    )
    show_run(run, f"tests {m.name}")
    if not run.ok:
        raise typer.Exit(1)


@app.command()
def reset(
    key: ModuleArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Back up your notebook, then restore the fresh notebook and the reference export."""
    from tito.student import lifecycle

    m = find(key)
    if lifecycle.state(m) == "not started":
        console.print(f"module {m.name} was never opened; nothing to reset.")
        return
    if not yes and paths.notebook(m).exists():
        question = f"Reset module {m.name}? Your notebook is kept as a backup."
        try:
            answer = typer.confirm(question)
        except typer.Abort:  # no answer: the input ended or Ctrl-C
            answer = False
        if not answer:
            raise TitoError(
                f"module {m.name} not reset; nothing changed",
                hint=f"answer y, or reset without a question: tito module reset {m.number} --yes",
            )
    backup, saved = lifecycle.reset(m)
    if backup is not None:
        console.print(f"your notebook was saved to {safe(paths.shown(backup))}")
    _say_saved(saved)
    ok(f"module {m.name} reset to the fresh notebook and the reference package code")


def _say_saved(saved) -> None:
    """One line per package file tito backed up before writing over a hand edit."""
    for backup in saved:
        console.print(
            f"{safe(paths.shown(backup.original))} held edits tito did not write; saved them to "
            f"{safe(paths.shown(backup.copy))} (tito writes the package files: edit your "
            "notebook in workspace/ instead)",
            soft_wrap=True,
        )


def _replaced(done: dict) -> None:
    """Name the completed modules whose package files no longer hold the code `complete`
    installed (a `git checkout -- tinytorch`, a hand edit), and how to put it back."""
    from tito.student import lifecycle

    gone = [m for m in MODULES if m.number in done and lifecycle.check_reference(m, done)]
    if not gone:
        return
    names = ", ".join(f"{m.number:02d} {m.slug}" for m in gone)
    again = (
        "tito module complete --again"
        if len(gone) == len(done) and len(gone) > 1
        else " and ".join(f"tito module complete {m.number}" for m in gone)
    )
    console.print(
        f"[bad]{names}: tinytorch/ no longer holds the code you completed[/bad] (it was put "
        f"back or changed since); install yours again: [name]{again}[/name]",
        soft_wrap=True,
    )
