"""The committed PyTorch reference data is what PyTorch answers today (needs torch, see conftest).

Each generator runs in memory and its arrays are compared with the committed
tests/NN_slug/torch_reference.npz: inputs exactly, float outputs within float32 rounding.
"""

import ast
import os
import subprocess
import sys

import oracle
import pytest

from torch_oracle import make

LIMIT = 3 * 2**20  # all reference files together: a student clones them


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", make.GENERATORS)
def test_committed_reference_is_current(name):
    committed = oracle.Reference(make.path(name)).arrays
    assert make.differences(make.build(make.generator(name)), committed) == [], (
        f"{make.path(name)} is stale: run python tests/torch_oracle/make.py {name[1:]}"
    )


def test_every_reference_file_has_a_generator_and_they_stay_small():
    made = {make.path(name) for name in make.GENERATORS}
    found = set(make.TESTS.glob(f"*/{oracle.FILENAME}"))
    assert found == made
    assert sum(path.stat().st_size for path in found) < LIMIT


def test_module_tests_never_import_torch():
    """A student's install has no torch: the module folders read the committed answers."""
    found = []
    for path in sorted(make.TESTS.glob("[0-9][0-9]_*/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                if name.split(".")[0] in ("torch", "torch_reference", "torch_oracle"):
                    found.append(f"{path.relative_to(make.TESTS)}:{node.lineno} imports {name}")
    assert found == []


HIDE_TORCH = """
import importlib.abc, importlib.util, sys
real = importlib.util.find_spec
def find_spec(name, *args):
    return None if name.split(".")[0] == "torch" else real(name, *args)
importlib.util.find_spec = find_spec
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NoTorch())
"""


@pytest.mark.parametrize("required", [False, True])
def test_without_torch_the_check_is_set_aside_with_its_reason_unless_required(tmp_path, required):
    """A student's run deselects it with one line; `make test` (which requires torch) fails."""
    (tmp_path / "sitecustomize.py").write_text(HIDE_TORCH)
    env = {k: v for k, v in os.environ.items() if k != "TINYTORCH_REQUIRE_TORCH"}
    env["PYTHONPATH"] = str(tmp_path)
    if required:
        env["TINYTORCH_REQUIRE_TORCH"] = "1"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-k", "not without_torch"],
        capture_output=True, text=True, env=env, cwd=make.TESTS.parent,
    )  # fmt: skip
    n = len(make.GENERATORS)
    if required:
        assert run.returncode == 1 and f"{n} failed" in run.stdout, run.stdout[-2000:]
        assert "No module named 'torch'" in run.stdout
    else:
        # the currency checks deselected (and the two runs of this test, by -k), one line why
        assert run.returncode == 0 and f"2 passed, {n + 2} deselected" in run.stdout, run.stdout
        assert "tinytorch: set aside the tests that need PyTorch" in run.stdout
