"""The command line: Typer apps that parse, call the wings below and print.

Nothing else in tito imports it."""
