"""A generic backward slip for every gradient a solution cell returns (issue 35, item 2).

Every `backward` method defined in a solution cell of a course notebook returns one gradient per
input of its operation (module 01's `Function` contract). For each returned position, the slip
flips the sign of that one gradient, as a student who slipped on a sign would: the other
gradients and the forward stay right. A flipped gradient equals the right one only where it is
zero, so a check that compares it on random inputs must see it.

The slips of one module are put into as few submissions as they fit: one slip per cell, and no
two slipped cells that some check declares together. A lost check that declares exactly one
slipped cell of its submission is that cell's slip's doing: the judge reruns a failed check with
the reference's code in every cell it does not declare (tito/grading/scoring.py, isolate).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import nbformat

FLIP = "(lambda g: None if g is None else -g)"


@dataclass(frozen=True)
class GradientSlip:
    cell: str  # the solution cell's grade id
    function: str  # "Class.backward"
    position: int  # which returned gradient is flipped
    source: str  # the cell's source with that slip

    @property
    def name(self) -> str:
        return f"{self.function}[{self.position}]"


def _own_returns(function: ast.FunctionDef) -> list[ast.Return]:
    """The return statements of `function` itself, not of functions nested in it."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _positions(value: ast.expr) -> int:
    """How many gradients a returned expression lists (a starred group counts as one)."""
    if isinstance(value, ast.Tuple):
        return len(value.elts)
    if isinstance(value, ast.IfExp):
        return max(_positions(value.body), _positions(value.orelse))
    return 0


def _flipped(value: ast.expr, position: int) -> ast.expr:
    """`value` with its gradient at `position` negated (None stays None)."""
    if isinstance(value, ast.IfExp):
        return ast.IfExp(value.test, _flipped(value.body, position),
                         _flipped(value.orelse, position))  # fmt: skip
    if not isinstance(value, ast.Tuple) or position >= len(value.elts):
        return value
    flip = ast.parse(FLIP, mode="eval").body
    elts = list(value.elts)
    chosen = elts[position]
    if isinstance(chosen, ast.Starred):
        each = ast.parse(f"map({FLIP}, _)", mode="eval").body
        each.args[1] = chosen.value
        elts[position] = ast.Starred(each, ast.Load())
    else:
        elts[position] = ast.Call(flip, [chosen], [])
    return ast.Tuple(elts, ast.Load())


def _replace(source: str, node: ast.expr, text: str) -> str:
    """`source` with the span of `node` replaced by `text` (ast columns count UTF-8 bytes)."""
    lines = source.encode().splitlines(keepends=True)
    start = sum(len(line) for line in lines[: node.lineno - 1]) + node.col_offset
    end = sum(len(line) for line in lines[: node.end_lineno - 1]) + node.end_col_offset
    data = source.encode()
    return (data[:start] + f"({text})".encode() + data[end:]).decode()


def backwards(source: str) -> list[tuple[str, ast.FunctionDef]]:
    """("Class.backward", its node) for every backward method of a cell that returns gradients."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "backward":
                    if any(_positions(r.value) for r in _own_returns(item)):
                        found.append((f"{node.name}.backward", item))
    return found


def slips_of_cell(cell: str, source: str) -> list[GradientSlip]:
    """One slip per gradient position of every backward in the cell's source."""
    slips = []
    for function, node in backwards(source):
        returns = _own_returns(node)
        for position in range(max(_positions(r.value) for r in returns)):
            text = source
            for ret in sorted(returns, key=lambda r: (r.lineno, r.col_offset), reverse=True):
                if position < _positions(ret.value):
                    text = _replace(text, ret.value, ast.unparse(_flipped(ret.value, position)))
            assert text != source
            slips.append(GradientSlip(cell, function, position, text))
    return slips


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def module_slips(source: nbformat.NotebookNode) -> list[GradientSlip]:
    """Every gradient slip of a course notebook's solution cells, in notebook order."""
    return [
        slip
        for cell in source.cells
        if cell.cell_type == "code" and _meta(cell).get("solution")
        for slip in slips_of_cell(_meta(cell)["grade_id"], cell.source)
    ]


def submissions(slips: list[GradientSlip], checks: dict[str, tuple[str, ...]]
                ) -> list[list[GradientSlip]]:  # fmt: skip
    """The slips packed into submissions: each holds at most one slip per cell, and no two
    slipped cells that one check declares together (so a lost check names its slip)."""
    together = {(a, b) for cells in checks.values() for a in cells for b in cells if a != b}
    packed: list[list[GradientSlip]] = []
    for slip in slips:
        for group in packed:
            if all(s.cell != slip.cell and (s.cell, slip.cell) not in together for s in group):
                group.append(slip)
                break
        else:
            packed.append([slip])
    return packed


def planted(source: nbformat.NotebookNode, group: list[GradientSlip]) -> nbformat.NotebookNode:
    """The reference notebook with every slip of `group` in its cell."""
    nb = nbformat.from_dict(source)
    by_cell = {slip.cell: slip.source for slip in group}
    for cell in nb.cells:
        if _meta(cell).get("grade_id") in by_cell:
            cell.source = by_cell[_meta(cell)["grade_id"]]
    return nb
