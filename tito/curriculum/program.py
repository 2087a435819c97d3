"""The program a module's checks run over one submission: the source notebook's cells in order,
each solution cell replaced by the student's (matched by grade id), then the graded cells. Built
the same way for grading (tito/grading/scoring.py) and for a diagnosis (tito/student/diagnose.py).

Each check declares the solution cell(s) it measures (`@graded(grades=...)`, read here from the
source without running it). `build_program(..., own=cells)` builds the isolated program of such a
check: the student's code in the declared cells only, the reference's in every other solution
cell, so the check measures the student's declared code alone.

A course cell tagged `demo` (`# %% tags=["demo"]` in the source) shows the student something
(a tour, a timing table, a plot) and defines nothing a check uses: the program leaves it out, so
it neither costs a submission its points nor the class its grading time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import nbformat

from tito.curriculum.notebooks import BEGIN_SOLUTION, END_SOLUTION, nbgrader_meta
from tito.curriculum.refusals import (
    bound_names,
    course_imports,
    forbidden,
    parse,
    protected_names,
)


def is_demo(cell) -> bool:
    """A course cell that only shows something (tagged `demo`): never part of a check's program."""
    return "demo" in cell.get("metadata", {}).get("tags", [])


@dataclass
class Program:
    """The cells every check of one submission runs, the checks, and what was noticed."""

    cells: list[tuple[str, str, int]]  # (label, code, index in the source)
    checks: list[tuple[str, float, str, int]]  # (grade_id, points, code, index)
    merged: nbformat.NotebookNode  # the source with the student's solution cells
    notes: list[str]
    refused: str = ""  # the first refusal, one line ("" when every cell may run)
    refusals: dict[str, str] = field(default_factory=dict)  # refused solution cell -> why
    functions: dict[str, list[str]] = field(default_factory=dict)  # check -> what it measures


def declared(code: str) -> tuple[str, ...]:
    """The solution cells a check cell's probes declare (`@graded(..., grades=...)`), in order,
    read from its source (the course's own, trusted); () when it declares none."""
    cells: list[str] = []
    for node in ast.walk(parse(code)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name != "graded":
            continue
        for keyword in node.keywords:
            if keyword.arg == "grades":
                try:
                    value = ast.literal_eval(keyword.value)
                except ValueError:
                    continue
                for cell in (value,) if isinstance(value, str) else value:
                    if isinstance(cell, str) and cell not in cells:
                        cells.append(cell)
    return tuple(cells)


def solution_functions(code: str) -> list[str]:
    """The functions a solution cell asks the student to write: the innermost function (as
    Class.method) around each solution region of the source cell, else its top-level names."""
    tree = parse(code)
    lines = code.splitlines()
    marks = [n + 1 for n, line in enumerate(lines) if line.strip() == "### BEGIN SOLUTION"]
    found: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                inside = [m for m in marks if child.lineno <= m <= (child.end_lineno or 0)]
                if not inside:
                    continue
                if isinstance(child, ast.ClassDef):
                    before = len(found)
                    visit(child, name + ".")
                    if len(found) == before:
                        found.append(name)
                elif name not in found:
                    found.append(name)

    visit(tree, "")
    if not found:
        found = sorted(bound_names(tree))
    return found


STUB_LINES = ("# TODO: your code here", "raise NotImplementedError(")


def untouched(code: str, reference: str) -> bool:
    """True when a student's solution cell is the release's: the reference cell's lines outside
    its solution regions, and in each region only a stub (nbgrader's or tito's), whitespace
    aside. Such a cell holds no code of the student's."""
    given, inside = [], False
    for line in reference.splitlines():
        marker = line.strip()
        if marker in (BEGIN_SOLUTION, END_SOLUTION):
            inside = marker == BEGIN_SOLUTION
        elif not inside and marker:
            given.append(marker)
    theirs = [line.strip() for line in code.splitlines() if line.strip()]
    return [line for line in theirs if not line.startswith(STUB_LINES)] == given


def solution_codes(source: nbformat.NotebookNode) -> dict[str, str]:
    """{grade id: code} of the source's solution cells."""
    meta = [(nbgrader_meta(c), c.source) for c in source.cells]
    return {m.get("grade_id"): code for m, code in meta if m.get("solution")}


def cell_functions(source: nbformat.NotebookNode, cells: tuple[str, ...]) -> dict[str, str]:
    """Each function the solution cells `cells` ask for (solution_functions) -> its cell."""
    codes = solution_codes(source)
    return {name: cell for cell in cells for name in solution_functions(codes.get(cell, ""))}


def describe_cells(source: nbformat.NotebookNode, cells: tuple[str, ...]) -> str:
    """The declared cells as a student reads them: "LayerNorm.forward (cell 'layernorm')"."""
    codes = solution_codes(source)
    parts = []
    for cell in cells:
        names = solution_functions(codes.get(cell, ""))
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        parts.append(f"{shown} (cell '{cell}')" if shown else f"cell '{cell}'")
    return "; ".join(parts)


def build_program(source: nbformat.NotebookNode, submission: nbformat.NotebookNode,
                  own: tuple[str, ...] | None = None) -> Program:  # fmt: skip
    """The program over `submission`; with `own`, only those solution cells are the student's,
    every other solution cell is the reference's (the source's)."""
    notes: list[str] = []
    theirs: dict[str, list[int]] = {}
    for index, cell in enumerate(submission.cells):
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id:
            theirs.setdefault(grade_id, []).append(index)
    for grade_id, where in theirs.items():
        if len(where) > 1:
            cells = " and ".join(str(i + 1) for i in where[:2])
            notes.append(f"cells {cells} share the grade id '{grade_id}'")
    known = {nbgrader_meta(c).get("grade_id") for c in source.cells}
    for grade_id, where in theirs.items():
        if grade_id not in known:
            notes.append(f"cell {where[0] + 1} has grade id '{grade_id}', which the assignment "
                         "does not have (renamed?); it is not graded")  # fmt: skip
    protected, imports = protected_names(source), course_imports(source)
    merged = nbformat.from_dict(source)
    cells, checks, refused, refusals = [], [], "", {}
    for index, cell in enumerate(merged.cells):
        if cell.cell_type != "code" or is_demo(cell):
            continue
        meta = nbgrader_meta(cell)
        label = meta.get("grade_id") or f"{index + 1}"
        if meta.get("solution") and own is not None and meta.get("grade_id") not in own:
            cells.append((label, cell.source, index))  # the reference's code
        elif meta.get("solution"):
            found = theirs.get(meta.get("grade_id"), [])
            if not found:
                notes.append(f"solution cell '{label}' is missing from the submission")
                cell.source = ""
                continue
            code = submission.cells[found[0]].get("source", "")
            code = code if isinstance(code, str) else "".join(code)
            why = forbidden(code, bound_names(parse(source.cells[index].source)), protected,
                            imports)  # fmt: skip
            if why:
                refusals[label] = why
                refused = refused or f"solution cell '{label}' {why}"
            cell.source = code
            cells.append((label, code, index))
        elif meta.get("grade"):
            checks.append((label, float(meta.get("points", 0)), cell.source, index))
        else:
            cells.append((label, cell.source, index))
    functions = {label: list(cell_functions(source, declared(code)))
                 for label, _, code, _ in checks}  # fmt: skip
    return Program(cells, checks, merged, notes, refused, refusals, functions)
