"""Every module's reference source runs top to bottom, so its graded cells pass on the solution."""

import os
import subprocess
import sys

import pytest

from tito.curriculum import notebooks
from tito.curriculum.catalog import MODULES
from tito.curriculum.paths import PACKAGE_ROOT


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_reference_runs_and_its_graded_cells_pass(module, tmp_path):
    # A percent-format source is a Python script: running it runs each graded cell's test call
    # in order, as nbgrader does when it executes the notebook.
    source = PACKAGE_ROOT / module.source
    graded = [
        cell
        for cell in notebooks.read_source(source).cells
        if cell.metadata.get("nbgrader", {}).get("grade")
    ]
    assert graded, f"{module.name} has no graded cell"
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT), "MPLBACKEND": "Agg"}
    run = subprocess.run(
        [sys.executable, str(source)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
