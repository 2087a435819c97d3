"""`pytest` run as its console script (not `python -m pytest`) imports the tito package, not the
folder tests/tito that the tests' path setting puts on sys.path."""

import subprocess
import sys
from pathlib import Path

import tito

ROOT = Path(__file__).resolve().parents[2]


def test_tito_is_the_package():
    assert tito.__file__ is not None, "tito is a namespace package here: tests/tito shadows it"
    assert Path(tito.__file__).resolve() == ROOT / "tito" / "__init__.py"


def test_a_bare_pytest_imports_the_tito_package():
    script = Path(sys.executable).with_name("pytest")
    assert script.is_file(), script
    node = f"{Path(__file__).relative_to(ROOT)}::test_tito_is_the_package"
    done = subprocess.run(
        [str(script), "-q", node], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:]
