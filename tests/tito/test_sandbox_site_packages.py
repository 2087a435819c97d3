"""The sandbox shows no installed package but numpy, wherever Python is installed: in a venv
made from a Python under a home folder (pyenv), the base interpreter's site-packages, the
system's dist-packages, a Python bundled with some tool under /usr and the venv's own are all
there only as empty folders (numpy bound back into its own). Before, the pyenv interpreter's
site-packages showed its 224 entries."""

from __future__ import annotations

import ast
import sys
import sysconfig
from pathlib import Path

from tito.sandbox import bwrap as sandbox

# every folder of installed packages the sandboxed process can see, with what it holds
WALK = """
import os, sys
roots = ROOTS
found = {}
for root in roots:
    for here, dirs, files in os.walk(root):
        if os.path.basename(here) in ("site-packages", "dist-packages"):
            found[here] = sorted(os.listdir(here))
            dirs[:] = []
        elif here.count(os.sep) - root.count(os.sep) > 5:
            dirs[:] = []
print("FOUND", repr(found))
sys.path[:0] = [p for p in found]
for name in ("typer", "nbgrader", "pip", "setuptools", "torch", "tito", "tinytorch", "numpy"):
    try:
        __import__(name)
        print("IMPORTED", name)
    except ImportError:
        pass
"""


def _roots() -> list[str]:
    """The host folders a Python's packages could be in: its prefixes and the system's."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots |= {str(Path(sys.executable).resolve().parent.parent), "/usr/lib", "/usr/local"}
    return sorted(r for r in roots if Path(r).is_dir())


def test_only_numpy_is_installed_anywhere_the_sandbox_looks(tmp_path):
    folder = tmp_path / "grade"
    folder.mkdir()
    (folder / "script.py").write_text(WALK.replace("ROOTS", repr(_roots())))
    done = sandbox.run_python("script.py", folder, "", 60)
    line = next(x for x in done.output.splitlines() if x.startswith("FOUND "))
    found = ast.literal_eval(line[len("FOUND ") :])
    base = sysconfig.get_path("purelib", vars={"base": sys.base_prefix})
    if Path(base).is_dir():  # the base interpreter's (pyenv: /root/.pyenv/versions/...)
        assert Path(base).resolve() in {Path(p).resolve() for p in found}, found
    assert found, done.output
    for where, names in found.items():
        assert set(names) <= {"numpy", "numpy.libs"}, (where, names[:20])
    imported = {x.split()[1] for x in done.output.splitlines() if x.startswith("IMPORTED ")}
    assert imported == {"numpy"}, done.output
