"""tito test: run a module's test suite by number or name, or all of them."""

from __future__ import annotations

from typing import Annotated

import typer

from tito.cli.console import console, safe
from tito.cli.module import TimeoutOption, run_live
from tito.cli.report import show_run
from tito.curriculum.catalog import MODULES, complete_key, dependents, find
from tito.errors import TitoError
from tito.student.runner import run_tests


def test(
    key: Annotated[
        str | None,
        typer.Argument(metavar="NAME", help="Module number or name.", autocompletion=complete_key),
    ] = None,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Every module's tests; with a module, it and every module that builds on it "
            "(directly or through another).",
        ),
    ] = False,
    timeout: TimeoutOption = None,
) -> None:
    """Run the tests of one module (or --all) against tinytorch/ and show real pass/fail counts.

    `tito test transformers` is `tito test 13`.
    `tito test tensor --all` adds every module that builds on tensor: what a change there broke.
    """
    if key is None and not all_:
        raise TitoError("give a module or --all", hint="tito test transformers, or tito test --all")
    chosen = list(MODULES)
    if key is not None:
        base = find(key)
        chosen = [base] + (dependents(base) if all_ else [])
    from tito.student import lifecycle  # jupytext: imported when the command runs, not at startup

    failed = False
    for m in chosen:
        label = f"tests {m.name}"
        edited = lifecycle.edited_since_complete(m)
        if edited:
            console.print(f"[note]note: {safe(edited)}[/note]", soft_wrap=True)
        locate = lifecycle.installed_map(m)
        run = run_live(
            label,
            lambda live, m=m, locate=locate: run_tests(
                m, timeout=timeout, on_event=live, locate=locate
            ),
        )
        show_run(run, label)
        failed |= not run.ok
    if failed:
        raise typer.Exit(1)
