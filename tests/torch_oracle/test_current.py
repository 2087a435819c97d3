"""The committed PyTorch reference data is what PyTorch answers today (needs torch, see conftest).

Each generator runs in memory and its arrays are compared with the committed
tests/NN_slug/torch_reference.npz: inputs exactly, float outputs within float32 rounding.
"""

import ast

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
