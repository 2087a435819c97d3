"""python -m tito: the same command line as `tito`."""

from tito.main import run

run()
