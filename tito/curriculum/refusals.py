"""What graded code may not do: tito reads (never runs) a student's solution cells and refuses
the ones that reach for the grader's machinery; see docs/instructor.md, "Integrity".

A deny-list over Python cannot be complete; it is one layer of several (tito/grading/scoring.py),
and the
sandbox (tito/sandbox/bwrap.py) does not rely on it.
"""

from __future__ import annotations

import ast

import nbformat

from tito.curriculum.notebooks import nbgrader_meta, parse_python

IMPORTS = {
    "numpy", "math", "tinytorch", "typing", "dataclasses", "__future__", "collections",
    "functools", "itertools", "abc", "enum", "re", "copy", "heapq", "bisect", "statistics",
    "numbers", "random", "json", "time", "warnings",
}  # fmt: skip
# not `operator` (attrgetter) or `string` (Formatter.get_field): both walk dunder attributes
# numpy's escape hatches and the attribute names of the interpreter's internals
ATTRIBUTES = {
    "testing", "ctypeslib", "ctypes", "f2py", "distutils", "sys", "os", "gc", "inspect",
    "importlib", "builtins", "subprocess", "signal", "threading", "f_locals",
    "f_globals", "f_back", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "gi_frame",
    "gi_code", "cr_frame", "ag_frame", "co_code", "settrace", "setprofile",
    # typing evaluates annotation strings; numpy's DataSource opens files and URLs
    "get_type_hints", "ForwardRef", "_eval_type", "_evaluate", "DataSource",
}  # fmt: skip
BUILTINS = {
    "eval", "exec", "compile", "__import__", "globals", "locals", "open", "breakpoint", "input",
    "exit", "quit", "help", "memoryview", "setattr", "delattr",
}  # fmt: skip
DUNDERS = {"__init__", "__name__", "__qualname__", "__call__", "__repr__", "__len__",
           "__getitem__", "__future__"}  # fmt: skip


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and name not in DUNDERS


def _imported(alias: ast.alias, node: ast.Import | ast.ImportFrom) -> tuple[str, str]:
    """(the name an import binds, what it binds it to): `import numpy as np` -> (np, numpy)."""
    if isinstance(node, ast.Import):
        first = alias.name.split(".")[0]
        return (alias.asname, alias.name) if alias.asname else (first, first)
    origin = f"{node.module}.{alias.name}" if node.level == 0 else f".{alias.name}"
    return alias.asname or alias.name, origin


def bound_names(tree: ast.Module, same: dict[str, str] | None = None) -> set[str]:
    """Names a cell binds in the notebook's namespace (functions and classes not entered).
    An import that binds a name to what `same` says it already is (`import numpy as np` where
    the course imports numpy as np) changes nothing and is not counted."""
    names: set[str] = set()
    same = same or {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(
            node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp
        ):
            return  # their own scope
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name, origin = _imported(alias, node)
                if same.get(name) != origin:
                    names.add(name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in tree.body:
        visit(statement)
    names.update(n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names)
    return names


def forbidden(code: str, allowed_names: set[str], protected: set[str],
              imports: dict[str, str] | None = None) -> str | None:  # fmt: skip
    """Why a student's solution cell may not run in the grader (None when it may).

    `protected` are the names the course's own cells use (tests included); a solution cell may
    bind one only if the reference version of that cell binds it too (`allowed_names`), so no
    cell can redefine `np`, `Tensor` or `isinstance` under a check. Importing a name as what
    the course's cells import it as (`imports`, from course_imports: `import numpy as np`)
    rebinds nothing; the default takes numpy as np.
    """
    try:
        tree = parse(code, strict=True)
    except SyntaxError:
        return None  # it fails where it runs, with Python's own message
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Name) and node.id in ("getattr", "vars") and id(node) not in called:
            return f"{where}: `{node.id}` may only be called directly"
        if isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            return f"{where}: `allow_pickle` is not allowed (a pickle runs code when loaded)"
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or "."] if node.level == 0 else ["."]
                if any(a.name == "*" for a in node.names):
                    return f"{where}: `from {node.module} import *` is not allowed"
                if any(a.name in ATTRIBUTES for a in node.names):
                    return f"{where}: importing {node.names[0].name} is not allowed"
            for name in modules:
                parts = name.split(".")
                if parts[0] not in IMPORTS or ATTRIBUTES & set(parts):
                    return f"{where}: `import {name}` is not allowed in graded code"
        elif isinstance(node, ast.Attribute):
            if node.attr in ATTRIBUTES or _is_dunder(node.attr):
                return f"{where}: `.{node.attr}` is not allowed in graded code"
        elif isinstance(node, ast.Name):
            if node.id in BUILTINS or _is_dunder(node.id):
                return f"{where}: `{node.id}` is not allowed in graded code"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            why = _bad_call(node)
            if why:
                return f"{where}: {why}"
    same = {"np": "numpy"} if imports is None else imports
    rebound = sorted((bound_names(tree, same) & protected) - allowed_names)
    if rebound:
        return f"it redefines `{rebound[0]}`, which the course's own cells use"
    return None


def _bad_call(node: ast.Call) -> str | None:
    name = node.func.id
    first = node.args[0] if node.args else None
    is_self = isinstance(first, ast.Name) and first.id == "self"
    if name == "vars" and not is_self:
        return "`vars` is allowed on `self` only"
    if name == "getattr" and not is_self:
        attr = node.args[1] if len(node.args) > 1 else None
        literal = isinstance(attr, ast.Constant) and isinstance(attr.value, str)
        if not literal or attr.value in ATTRIBUTES or _is_dunder(attr.value):
            return "`getattr` needs a plain attribute name written out"
    return None


def parse(code: str, strict: bool = False) -> ast.Module:
    try:
        return parse_python(code)
    except SyntaxError:
        if strict:
            raise
        return ast.Module(body=[], type_ignores=[])


def protected_names(source: nbformat.NotebookNode) -> set[str]:
    """The names the course's own code cells (locked cells, tests) take from the notebook: the
    globals they read (names a cell never assigns itself) and what they import or define."""
    names: set[str] = set()
    for cell in source.cells:
        if cell.cell_type == "code" and not nbgrader_meta(cell).get("solution"):
            tree = parse(cell.source)
            read, stored = set(), set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Name):
                    (read if isinstance(node.ctx, ast.Load) else stored).add(node.id)
                elif isinstance(node, ast.arg):
                    stored.add(node.arg)
            names |= read - stored
            names |= {
                alias.asname or alias.name.split(".")[0]
                for node in tree.body
                if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names
            }
            names |= {
                node.name
                for node in tree.body
                if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            }
    return names


def course_imports(source: nbformat.NotebookNode) -> dict[str, str]:
    """name -> what the course's own code cells import it as, for the names they import one
    way only (`np` -> `numpy`, `Tensor` -> `tinytorch.core.tensor.Tensor`)."""
    found: dict[str, set[str]] = {}
    for cell in source.cells:
        if cell.cell_type == "code" and not nbgrader_meta(cell).get("solution"):
            for node in parse(cell.source).body:
                if isinstance(node, ast.Import | ast.ImportFrom):
                    for alias in node.names:
                        name, origin = _imported(alias, node)
                        found.setdefault(name, set()).add(origin)
    return {name: origins.pop() for name, origins in found.items() if len(origins) == 1}
