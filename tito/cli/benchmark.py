"""tito benchmark: speed, memory and quality of tinytorch against PyTorch on the CPU.

The benchmark lives in benchmarks/ (a client of tinytorch and of tito's grading), so tito runs it
as its own program, `python -m benchmarks.run`, and imports nothing from it: no package cycle.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

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
    if importlib.util.find_spec("benchmarks") is None:
        raise TitoError(
            "this tito has no benchmarks/ folder beside it (only a clone of the repository has)",
            hint="clone the repository and install it with `pip install -e .`",
        )
    args = [sys.executable, "-m", "benchmarks.run", *(["--quick"] if quick else [])]
    args += [*(["--config", config] if config else []), *(["--out", str(out)] if out else [])]
    args += ["--quality"] if quality else []
    code = subprocess.run(args, check=False).returncode
    if code:
        raise typer.Exit(code)
