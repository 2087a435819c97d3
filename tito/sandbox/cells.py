"""What both sandbox scripts need to run a notebook's cells (tito/sandbox/check_runner.py and
tito/sandbox/trace_runner.py): a compiler that keeps `from __future__` in force across cells, as
Jupyter does, the one-line description of an error, and the loader of the files copied next to
them. The scripts never import tito: tito copies this file beside them (bwrap.stage_script) and
they load it from there. It needs nothing but the standard library.
"""

import __future__

import importlib.util
import os


class Compiler:
    """compile() keeping `from __future__` statements in force for later cells, as Jupyter does."""

    def __init__(self):
        self.flags = 0

    def __call__(self, code: str, label: str, optimize: int = -1):
        compiled = compile(code, f"<cell {label}>", "exec", self.flags, True, optimize=optimize)
        for name in __future__.all_feature_names:
            feature = getattr(__future__, name)
            if compiled.co_flags & feature.compiler_flag:
                self.flags |= feature.compiler_flag
        return compiled


def describe(err: BaseException) -> str:
    """'Name: first line of the message' (at most 300 characters of it); a student's __str__
    that raises gives the name alone."""
    try:
        text = str(err).strip().splitlines()
    except BaseException:
        text = []
    return f"{type(err).__name__}: {text[0][:300]}" if text else type(err).__name__


def load_sibling(script: str, name: str):
    """The module in the file `name` next to the file `script` (this one, npzwire.py)."""
    path = os.path.join(os.path.dirname(os.path.abspath(script)), name)
    spec = importlib.util.spec_from_file_location("_" + name.removesuffix(".py"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
