"""tito milestone: list the milestones and run one (the milestones themselves are milestones/)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

import milestones
from tito.cli.console import console, ok
from tito.curriculum import catalog, paths
from tito.errors import TitoError
from tito.student import progress

app = typer.Typer(
    help="Run the milestones: history's turning points, from the perceptron to a GPT, with your "
    "own tinytorch.",
    no_args_is_help=True,
)


@app.command("list")
def list_milestones() -> None:
    """Every milestone in historical order, the modules it needs, and whether you can run it."""
    table = Table(title="milestones, in historical order; times on 2 idle cores")
    table.add_column("year", justify="right")
    narrow = 11 if console.width < 120 else None  # in 80 columns the lists wrap, not the words
    table.add_column("milestone: what it does", ratio=1)  # takes the room the others leave
    table.add_column("needs modules", max_width=narrow)
    table.add_column("--quick / full", no_wrap=True)
    table.add_column("ready", max_width=narrow and 16)
    for m in sorted(milestones.MILESTONES, key=lambda m: m.year):
        missing = catalog.missing(m.requires, paths.root())
        ready = (
            "[green]yes[/]"
            if not missing
            else "missing " + " ".join(f"{x.number:02d}" for x in missing)
        )
        took = f"{m.stated(True, brief=True)} / {m.stated(False, brief=True)}"
        what = f"[name]{m.name}[/name]: {m.description}"
        table.add_row(str(m.year), what, catalog.number_ranges(m.requires), took, ready)
    console.print(table)
    console.print("run one with [name]tito milestone run NAME[/name]")


@app.command()
def run(
    name: Annotated[
        str,
        typer.Argument(help=", ".join(m.name for m in milestones.MILESTONES) + "."),
    ],
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="A smaller model and a shorter run; `tito milestone list` gives the times.",
        ),
    ] = False,
    data: Annotated[
        Path | None, typer.Option(help="Train on this UTF-8 text file instead of the default.")
    ] = None,
    steps: Annotated[
        int | None, typer.Option(help="Training steps (default: the config's).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed for the split, the model and batches (>= 0).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Output folder (default runs/NAME, --quick runs/NAME-quick)."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the checkpoint in --out.")
    ] = False,
    config: Annotated[
        str | None, typer.Option(help="Model size, a preset name: nano, tiny or small.")
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="char or bpe (module 10's tokenizers; default: the config's)."),
    ] = None,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="compress, olympics: use a GPT run that stopped before its last step.",
        ),
    ] = False,
) -> None:
    """Run a milestone: `tito milestone run gpt` trains a GPT and makes it write."""
    try:
        milestone = milestones.find(name)
        missing = catalog.missing(milestone.requires, paths.root())
        if missing:
            raise TitoError(
                f"milestone {milestone.name} needs modules your package does not have yet: "
                + ", ".join(x.name for x in missing),
                hint=f"complete them first, e.g. `tito module complete {missing[0].number}`",
            )
        # a --quick run never replaces the full run's files
        out = out if out is not None else paths.root() / "runs" / default_folder(milestone, quick)
        options = milestones.RunOptions(
            out,
            quick=quick,
            data=data,
            steps=steps,
            seed=seed,
            resume=resume,
            config=config,
            tokenizer=tokenizer,
            console=console,
            data_dir=paths.root() / "data",
            completed=frozenset(progress.load()),
            allow_partial=allow_partial,
        )
        with _one_blas_thread():
            summary = milestone.run(options)
    except milestones.MilestoneError as err:
        raise TitoError(err.message, hint=err.hint, exit_code=err.exit_code) from None
    except Exception as err:  # a failure in the student's own code names the module and cell
        from tito.student import lifecycle  # notebooks and nbformat: only when something failed

        found = lifecycle.student_code_at(err.__traceback__)
        if found is None:
            raise
        module, where = found
        raise TitoError(
            f"milestone {name} failed in your module {module.number:02d} {module.slug}, "
            f"{where}: {type(err).__name__}: {err}",
            hint=f"fix that cell and run `tito module complete {module.number}` again (or "
            f"`tito module export {module.number} --force` for the reference)",
        ) from None
    ok(f"wrote {', '.join(summary['files'])} to {out}")


def default_folder(milestone, quick: bool) -> str:
    return f"{milestone.name}-quick" if quick else milestone.name


def _one_blas_thread():
    """One BLAS thread unless the user chose a number (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS).

    The second core goes to a second data-parallel worker instead (module 18's DataParallel, see
    milestones/training.py; a forked process on Linux): it runs the softmaxes and GELUs in
    parallel too, where BLAS threads run only the matrix products, and nothing spin-waits when
    another process wants a core.
    """
    import numpy  # noqa: F401 - load numpy's BLAS first, so that the limit reaches it
    from threadpoolctl import threadpool_limits

    chosen = any(os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"))
    return threadpool_limits(limits=None if chosen else 1, user_api="blas")
