"""tito milestone: list the milestones and run one (the logic lives in milestones/)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from threadpoolctl import threadpool_limits

from tito import paths
from tito.console import console
from tito.errors import TitoError

app = typer.Typer(
    help="Run the milestones: a GPT trained with your own tinytorch.", no_args_is_help=True
)


@app.command("list")
def list_milestones() -> None:
    """Every milestone, the modules it needs, and whether your package has them."""
    ms = paths.import_beside("milestones")
    table = Table(title="milestones")
    table.add_column("milestone", style="name")
    table.add_column("what it does")
    table.add_column("needs modules")
    table.add_column("ready")
    for m in ms.MILESTONES:
        missing = m.missing(paths.root())
        ready = (
            "[green]yes[/]"
            if not missing
            else "missing " + " ".join(f"{x.number:02d}" for x in missing)
        )
        table.add_row(m.name, m.description, " ".join(f"{n:02d}" for n in m.requires), ready)
    console.print(table)
    console.print("run one with [name]tito milestone run NAME[/name]")


@app.command()
def run(
    name: Annotated[str, typer.Argument(help="gpt, attention, translate or scaling.")],
    quick: Annotated[
        bool, typer.Option("--quick", help="A smaller model and run: about 10 s on 2 cores.")
    ] = False,
    data: Annotated[
        Path | None, typer.Option(help="Train on this UTF-8 text file instead of the default.")
    ] = None,
    steps: Annotated[
        int | None, typer.Option(help="Training steps (default: the config's).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed for the split, the model and batches.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder (default runs/NAME).")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the checkpoint in --out.")
    ] = False,
    config: Annotated[
        str | None, typer.Option(help="Model config: tiny, quick or default.")
    ] = None,
) -> None:
    """Run a milestone: `tito milestone run gpt` trains a GPT and makes it write."""
    ms = paths.import_beside("milestones")
    milestone = ms.find(name)
    if milestone is None:
        known = ", ".join(m.name for m in ms.MILESTONES)
        raise TitoError(f"unknown milestone '{name}'", hint=f"choose one of: {known}")
    missing = milestone.missing(paths.root())
    if missing:
        first = missing[0].number
        raise TitoError(
            f"milestone {name} needs modules your package does not have yet: "
            + ", ".join(x.name for x in missing),
            hint=f"complete them first, e.g. `tito module complete {first}`",
        )
    out = out if out is not None else paths.root() / "runs" / milestone.name
    if milestone.name == "translate" and (data is not None or resume):
        why = "makes its own corpus" if data is not None else "keeps no checkpoint"
        raise TitoError(
            f"{'--data' if data is not None else '--resume'} does not apply to translate: it {why}",
            hint="run `tito milestone run translate` without it",
        )
    modules = {"attention": "milestones.attention", "translate": "milestones.translate"}
    program = paths.import_beside(modules.get(milestone.name, "milestones.gpt"))
    # One BLAS thread (set after the import above has loaded numpy's BLAS) unless the user chose a
    # number: at these matrix sizes a second thread saves about 20% on an idle 2-core machine,
    # and its spin-waiting doubles the step time as soon as another process wants a core.
    chosen = any(os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"))
    with threadpool_limits(limits=None if chosen else 1, user_api="blas"):
        if milestone.name == "gpt":
            program.run(program.Options(out, quick, data, steps, seed, resume, config))
        elif milestone.name == "scaling":
            program.run_scaling(out, quick, config)
        elif milestone.name == "translate":
            try:
                program.run(program.Options(out, quick, steps, seed, config))
            except program.MilestoneError as err:
                raise TitoError(err.message, hint=err.hint) from None
        else:
            program.run(out, seed or 0, steps)
