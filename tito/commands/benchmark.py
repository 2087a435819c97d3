"""tito benchmark: speed, memory and quality of tinytorch against PyTorch on the CPU."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import typer

from tito.console import console
from tito.errors import TitoError, require_torch

app = typer.Typer(help="Benchmark tinytorch against PyTorch on the CPU.", no_args_is_help=True)


@app.command()
def run(
    quick: Annotated[
        bool, typer.Option("--quick", help="Small config and few repetitions (under a minute).")
    ] = False,
    config: Annotated[
        str,
        typer.Option(
            help="small, medium, gpt2-small, conv (the convolution rows) or all "
            "(default: all; --quick: small)."
        ),
    ] = "",
    out: Annotated[
        Path | None, typer.Option(help="Write the results as JSON to this file.")
    ] = None,
    quality: Annotated[
        bool, typer.Option("--quality", help="Also train both for 2,000 steps and compare loss.")
    ] = False,
) -> None:
    """Time training steps and generation, measure peak memory, print the table."""
    if config not in ("", "small", "medium", "gpt2-small", "conv", "all"):
        raise TitoError(
            f"unknown --config {config!r}", hint="choose small, medium, gpt2-small, conv or all"
        )
    require_torch("the benchmark compares tinytorch with")
    try:
        benchmark = importlib.import_module("benchmarks.run").benchmark
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("benchmarks"):
            raise
        raise TitoError(
            "this tito has no benchmarks/ folder beside it (only a clone of the repository has)",
            hint="clone the repository and install it with `pip install -e .`",
        ) from None
    benchmark(config or None, quick, out, 2000 if quality else 0, console)
