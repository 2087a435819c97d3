"""`tito diagnose --timeout SECONDS` stops an endless loop, and says what runs and its limit as
each run starts, so a long wait is never silent."""

import time

import nbformat

from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import find

ADD = "        return a + b\n"


def test_an_endless_loop_stops_at_the_timeout_and_each_run_is_announced(tmp_path, cli):
    nb = notebooks.read_source(paths.source(find(1)))
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")
             and ADD in c.source]  # fmt: skip
    assert len(cells) == 1
    cells[0].source = cells[0].source.replace(ADD, "        while True:\n            pass\n")
    path = tmp_path / "tensor.ipynb"
    nbformat.write(nb, path)
    began = time.monotonic()
    result = cli("diagnose", "1", "--notebook", str(path), "--timeout", "8")
    assert time.monotonic() - began < 60
    assert result.exit_code == 1
    assert "running module 01's checks over the reference (stops after 8 s)" in result.output
    assert "over your notebook tensor.ipynb (stops after 8 s)" in result.output
    assert "the checks over your notebook tensor.ipynb did not finish in 8 s" in result.stderr
    assert "--timeout SECONDS" in result.stderr
