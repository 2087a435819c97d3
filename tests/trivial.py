"""Trivial submissions of a module: the reference's solution cells with every function's body
replaced by a non-answer (zeros, the input passed through, NotImplementedError, random numbers,
a constant). `__init__` keeps the reference's body, so the objects exist and only the work is
missing. None of them does the work, so none may score more than the blank release.
"""

from __future__ import annotations

import ast

import nbformat

KINDS = ("zeros", "passthrough", "notimplemented", "random", "constant")

# Returns a value shaped like the function's first argument (after self), of the same kind:
# a Tensor-like object (one with .data) stays one, an array stays an array, a number a number.
HELPER = """\
def _trivial_value(kind, args):
    import numpy as _np
    x = args[0] if args else None
    if kind == "passthrough":
        return x
    data = getattr(x, "data", x)
    try:
        array = _np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        return x
    if kind == "zeros":
        new = _np.zeros_like(array)
    elif kind == "random":
        new = _np.random.default_rng(7).normal(size=array.shape)
    else:
        new = _np.full_like(array, 0.5)
    if data is not x:
        try:
            return type(x)(new)
        except Exception:
            return x
    return new if array.ndim else float(new)
"""


class _Gut(ast.NodeTransformer):
    def __init__(self, kind: str):
        self.kind = kind

    def visit_FunctionDef(self, node):
        if node.name == "__init__":
            return node
        names = [a.arg for a in node.args.posonlyargs + node.args.args]
        if names and names[0] in ("self", "cls", "ctx"):
            names = names[1:] or names[:1]
        if self.kind == "notimplemented":
            body = "raise NotImplementedError()"
        else:
            body = f"return _trivial_value({self.kind!r}, [{', '.join(names)}])"
        node.body = ast.parse(body).body
        return node

    visit_AsyncFunctionDef = visit_FunctionDef


def gutted(code: str, kind: str) -> str:
    """The cell's code with its functions made trivial; its `#|` directives (export) kept."""
    tree = _Gut(kind).visit(ast.parse(code))
    directives = [line for line in code.splitlines() if line.startswith("#|")]
    body = ast.unparse(ast.fix_missing_locations(tree))
    return "\n".join([*directives, HELPER, body])


def trivial(source: nbformat.NotebookNode, kind: str) -> nbformat.NotebookNode:
    """The reference notebook with every solution cell's functions made trivial."""
    nb = nbformat.from_dict(source)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            cell.source = gutted(cell.source, kind)
    return nb


def all_trivial(source) -> dict[str, nbformat.NotebookNode]:
    return {f"trivial-{kind}": trivial(source, kind) for kind in KINDS}
