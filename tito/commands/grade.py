"""tito grade (placeholder until its issue lands)."""

import typer

app = typer.Typer(help="grade commands.", no_args_is_help=True)
