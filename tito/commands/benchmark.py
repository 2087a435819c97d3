"""tito benchmark (placeholder until its issue lands)."""

import typer

app = typer.Typer(help="benchmark commands.", no_args_is_help=True)
