"""tito test: run a module's test suite by number or name, or all of them."""

from __future__ import annotations

from typing import Annotated

import typer

from tito.catalog import MODULES, find
from tito.commands.module import show_run
from tito.errors import TitoError
from tito.runner import run_tests

app = typer.Typer(help="Run module tests: `tito test transformers` == `tito test 13`.")


@app.callback(invoke_without_command=True)
def test(
    key: Annotated[str | None, typer.Argument(help="Module number or name.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Run every module's tests.")] = False,
) -> None:
    """Run the tests of one module (or --all) and show real pass/fail counts."""
    if (key is None) == (not all_):
        raise TitoError("give a module or --all", hint="tito test transformers, or tito test --all")
    failed = False
    for m in MODULES if all_ else (find(key),):
        run = run_tests(m)
        show_run(run, f"tests {m.name}")
        failed |= not run.ok
    if failed:
        raise typer.Exit(1)
