"""python -m tito: the same command line as `tito`."""

from tito.cli.main import run

run()
