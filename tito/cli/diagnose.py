"""tito diagnose: where a student's module first parts from the reference, and a likely why."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from tito.cli.console import console, ok
from tito.curriculum.catalog import complete_key, find
from tito.errors import TitoError


def diagnose(
    key: Annotated[
        str,
        typer.Argument(metavar="NAME", help="Module number or name.", autocompletion=complete_key),
    ],
    notebook: Annotated[
        Path | None,
        typer.Option(help="The notebook to diagnose (default: the module's in workspace/)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the checks' random inputs.")] = 0,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Stop each of the two runs after this many seconds (default 900, or "
            "TITO_TEST_TIMEOUT), as `tito module complete` does.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Name the first operation where your module's numbers part from the reference's.

    Runs module NAME's checks over your notebook and over the reference, on the same inputs, and
    names the first operation where your numbers differ: forward or backward, how far off, where
    in your notebook, and a likely cause. Shows no reference code and no test code.
    """
    from tito.grading.edition import holds_reference
    from tito.student.diagnose import diagnose as run
    from tito.student.runner import timeout_seconds

    module = find(key)
    if not holds_reference(module):  # a student edition, before the module is published
        raise TitoError(
            f"tito diagnose compares your module {module.number:02d} with the reference "
            "solution, which this student edition does not hold",
            hint=f"your instructor can diagnose your submission with "
            f"`tito grade feedback {module.number} --diagnose`",
        )
    limit = timeout_seconds(timeout)

    def started(over: str, seconds: float) -> None:
        console.print(f"running module {module.number:02d}'s checks over {escape(over)} "
                      f"(stops after {seconds:g} s)")  # fmt: skip

    result = run(module, notebook, seed=seed, timeout=limit, on_run=started)
    console.print(f"diagnose {module.name}: {len(result.checks)} checks, seed {seed}")
    for note in result.notes:
        console.print(f"[bad]your cell failed:[/bad] {escape(note)}")
    by_check = {f.check: f for f in result.findings}
    for check in result.checks:
        finding = by_check.get(check)
        if finding is None:
            console.print(f"[ok]same as the reference[/ok]  {escape(check)}")
            continue
        console.print(f"[bad]differs[/bad]  {escape(check)}: {escape(finding.what)}")
        console.print(f"  {escape(finding.summary)}")
        if finding.place:
            console.print(f"  at {escape(finding.place)}")
        console.print(f"  [note]likely:[/note] {escape(finding.hint)}")
    if result.clean and not result.notes:
        ok(f"module {module.number:02d}'s checks hold and every operation matches the reference")
        console.print(f"`tito module complete {module.number}` runs the module's tests, which "
                      "check more than these")  # fmt: skip
        return
    raise typer.Exit(1)
