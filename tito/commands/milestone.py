"""tito milestone (placeholder until its issue lands)."""

import typer

app = typer.Typer(help="milestone commands.", no_args_is_help=True)
