"""tito module: list, status, open, complete, export, test, reset."""

from __future__ import annotations

import shutil
import subprocess
from typing import Annotated

import typer
from rich.table import Table

from tito import paths, progress
from tito.catalog import MODULES, find
from tito.console import console, fail, ok
from tito.errors import TitoError
from tito.runner import TestRun, run_tests

# tito.lifecycle imports jupytext and nbformat (seconds): the commands that need it import it
# when they run, so `tito --help` and `tito milestone` start fast.

app = typer.Typer(help="Work through the course modules.", no_args_is_help=True)

ModuleArg = Annotated[str, typer.Argument(help="Module number or name, e.g. 13 or transformers.")]


def _table(show_counts: bool) -> Table:
    from tito import lifecycle

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
            " ".join(f"{n:02d}" for n in m.requires) or "-",
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
    console.print(_table(show_counts=True))
    done = progress.load()
    pending = [m for m in MODULES if m.number not in done]
    console.print(f"{len(done)} of {len(MODULES)} modules complete.")
    if pending:
        console.print(f"next: [name]tito module open {pending[0].number}[/name]")


@app.command("open")
def open_(
    key: ModuleArg,
    jupyter: Annotated[bool, typer.Option(help="Start Jupyter Lab on the notebook.")] = False,
) -> None:
    """Create your working notebook for a module (never overwrites an existing one)."""
    from tito import lifecycle

    m = find(key)
    path, created = lifecycle.open_module(m)
    rel = path.relative_to(paths.root())
    if created:
        ok(f"created {rel} with the solutions removed; fill in each TODO")
    else:
        console.print(f"{rel} already exists; it was left as it is.")
    console.print(f"when it is done: [name]tito module complete {m.number}[/name]")
    if jupyter:
        exe = shutil.which("jupyter")
        if exe is None:
            raise TitoError("jupyter is not installed", hint="pip install jupyterlab")
        subprocess.run([exe, "lab", str(path)], check=False)


def show_run(run: TestRun, label: str) -> None:
    summary = f"{run.passed} passed, {run.failed} failed"
    if run.skipped:
        summary += f", {run.skipped} skipped"
    if run.ok:
        ok(f"{label}: {summary}")
        return
    lines = [ln for ln in run.output.splitlines() if ln.startswith(("FAILED", "ERROR", "E "))]
    for line in lines[:20]:
        console.print(line, markup=False, style="red")
    fail(f"{label}: {summary}")


@app.command()
def complete(key: ModuleArg) -> None:
    """Export your notebook into tinytorch, run the module's tests, record progress on a pass."""
    from tito import lifecycle

    m = find(key)
    run, recorded = lifecycle.complete(m)
    show_run(run, f"module {m.name}")
    if not recorded:
        fail(
            "not recorded; the package keeps its previous code for this module",
            hint=f"fix the failing parts in {paths.notebook(m).relative_to(paths.root())} "
            f"and run `tito module complete {m.number}` again",
        )
        raise typer.Exit(1)
    ok(f"module {m.name} complete; your code is now in tinytorch")


@app.command()
def export(
    key: Annotated[str | None, typer.Argument(help="Module number or name.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Export every module.")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Only compare tinytorch/ with modules/; fail on drift.")
    ] = False,
) -> None:
    """Rebuild tinytorch/ from the reference sources in modules/."""
    from tito import lifecycle

    if (key is None) == (not all_):
        raise TitoError("give a module or --all", hint="tito module export 13, or --all")
    chosen = MODULES if all_ else (find(key),)
    if check:
        diffs = [d for m in chosen for d in lifecycle.check_reference(m)]
        for d in diffs:
            console.print(d, markup=False)
        if diffs:
            raise TitoError(
                f"tinytorch/ differs from modules/ in {len(diffs)} file(s)",
                hint="run `tito module export --all` (or edit modules/, not tinytorch/)",
            )
        ok(f"tinytorch/ matches modules/ for {len(chosen)} module(s)")
        return
    for m in chosen:
        for path in lifecycle.export_reference(m):
            console.print(f"wrote {path.relative_to(paths.root())}")


@app.command("test")
def test_module(key: ModuleArg) -> None:
    """Run a module's tests against the current tinytorch package."""
    m = find(key)
    run = run_tests(m)
    show_run(run, f"tests {m.name}")
    if not run.ok:
        raise typer.Exit(1)


@app.command()
def reset(
    key: ModuleArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Back up your notebook, then restore the fresh notebook and the reference export."""
    from tito import lifecycle

    m = find(key)
    if not yes and paths.notebook(m).exists():
        typer.confirm(f"Reset module {m.name}? Your notebook is kept as a backup.", abort=True)
    backup = lifecycle.reset(m)
    if backup is not None:
        console.print(f"your notebook was saved to {backup.relative_to(paths.root())}")
    ok(f"module {m.name} reset to the fresh notebook and the reference package code")
