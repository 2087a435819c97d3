"""The program a module's checks run over one submission: the source notebook's cells in order,
each solution cell replaced by the student's (matched by grade id), then the graded cells. Built
the same way for grading (tito/grading/scoring.py) and for a diagnosis (tito/student/diagnose.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import nbformat

from tito.curriculum.refusals import bound_names, forbidden, parse, protected_names


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


@dataclass
class Program:
    """The cells every check of one submission runs, the checks, and what was noticed."""

    cells: list[tuple[str, str, int]]  # (label, code, index in the source)
    checks: list[tuple[str, float, str, int]]  # (grade_id, points, code, index)
    merged: nbformat.NotebookNode  # the source with the student's solution cells
    notes: list[str]
    refused: str = ""


def build_program(source: nbformat.NotebookNode, submission: nbformat.NotebookNode) -> Program:
    notes: list[str] = []
    theirs: dict[str, list[int]] = {}
    for index, cell in enumerate(submission.cells):
        grade_id = _meta(cell).get("grade_id")
        if grade_id:
            theirs.setdefault(grade_id, []).append(index)
    for grade_id, where in theirs.items():
        if len(where) > 1:
            cells = " and ".join(str(i + 1) for i in where[:2])
            notes.append(f"cells {cells} share the grade id '{grade_id}'")
    known = {_meta(c).get("grade_id") for c in source.cells}
    for grade_id, where in theirs.items():
        if grade_id not in known:
            notes.append(f"cell {where[0] + 1} has grade id '{grade_id}', which the assignment "
                         "does not have (renamed?); it is not graded")  # fmt: skip
    protected = protected_names(source)
    merged = nbformat.from_dict(source)
    cells, checks, refused = [], [], ""
    for index, cell in enumerate(merged.cells):
        if cell.cell_type != "code":
            continue
        meta = _meta(cell)
        label = meta.get("grade_id") or f"{index + 1}"
        if meta.get("solution"):
            found = theirs.get(meta.get("grade_id"), [])
            if not found:
                notes.append(f"solution cell '{label}' is missing from the submission")
                cell.source = ""
                continue
            code = submission.cells[found[0]].get("source", "")
            code = code if isinstance(code, str) else "".join(code)
            why = forbidden(code, bound_names(parse(source.cells[index].source)), protected)
            if why and not refused:
                refused = f"solution cell '{label}' {why}"
            cell.source = code
            cells.append((label, code, index))
        elif meta.get("grade"):
            checks.append((label, float(meta.get("points", 0)), cell.source, index))
        else:
            cells.append((label, cell.source, index))
    return Program(cells, checks, merged, notes, refused)
