"""`import tinytorch` works at every stage of the course: names resolve lazily, and a name
whose module is not in the package yet says which module to complete."""

import shutil
import subprocess
import sys

from tito.curriculum.catalog import GIVEN
from tito.curriculum.paths import PACKAGE_ROOT


def test_a_package_with_only_module_01_imports_and_names_what_is_missing(tmp_path):
    package = tmp_path / "tinytorch"
    shutil.copytree(
        PACKAGE_ROOT / "tinytorch", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    for path in package.rglob("*.py"):
        given = path.relative_to(tmp_path).as_posix() in GIVEN
        if path.name != "__init__.py" and path != package / "core" / "tensor.py" and not given:
            path.unlink()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import numpy as np; import tinytorch; "
        "import tinytorch.nn, tinytorch.optim; "
        "assert tinytorch.__file__.startswith(sys.argv[1]); "
        "print(np.asarray(tinytorch.Tensor([1.0, 2.0])).dtype); tinytorch.nn.Linear"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.stdout.strip() == "float32"
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: tinytorch.nn.Linear comes from course module 03 layers")
    assert "tito module complete 3" in last
