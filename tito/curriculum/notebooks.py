"""Course sources and notebooks: conversion, solution stripping and metadata checks."""

from __future__ import annotations

import ast
import json
import re
import threading
from pathlib import Path

import jupytext
import nbformat

from tito.curriculum.catalog import CourseModule
from tito.errors import TitoError


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata (grade_id, solution, grade, points), {} for a plain cell."""
    return cell.get("metadata", {}).get("nbgrader", {})


BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
NBGRADER_KEYS = {"grade", "grade_id", "locked", "schema_version", "solution", "task"}


def read_source(path: Path) -> nbformat.NotebookNode:
    """Convert a jupytext percent source into a notebook, with nbgrader metadata checked."""
    if not path.parent.parent.is_dir():  # no modules/ at all: tito is not looking at a clone
        raise TitoError(
            f"tito found no course at {path.parent.parent.parent} (it has no modules/ folder)",
            hint='install tito from a clone with `pip install -e ".[test]"`, or point TITO_ROOT '
            "at the clone",
        )
    if not path.exists():
        raise TitoError(f"course source {path} is missing", hint="restore it with git checkout")
    notebook = jupytext.read(path, fmt="py:percent")
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{index:03d}"  # stable ids keep conversions byte-identical
    validate_metadata(notebook, path)
    return notebook


def read_notebook(path: Path, module: CourseModule | None = None) -> nbformat.NotebookNode:
    """Read an .ipynb, turning broken JSON into a clear error.

    `module`: the student's own notebook of that module, named in the error as they can type
    it (relative to where they are), with the command that repairs it.
    """
    from tito.curriculum.paths import shown

    where = shown(path) if module is not None else str(path)
    if not path.exists():
        hint = f"create it with `tito module open {module.number}`" if module else None
        raise TitoError(f"no notebook at {where}", hint=hint)
    hint = "fix it by hand" + (
        f", or `tito module reset {module.number}` (which keeps your file as a backup)"
        if module
        else ""
    )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise TitoError(f"{where} is not a valid notebook ({type(err).__name__})", hint) from None
    cells = raw.get("cells") if isinstance(raw, dict) else None
    if not isinstance(cells, list) or not all(
        isinstance(c, dict) and c.get("cell_type") in ("code", "markdown", "raw") for c in cells
    ):
        raise TitoError(f"{where} is valid JSON but not a notebook (no list of cells)", hint)
    try:
        return nbformat.reads(json.dumps(raw), as_version=4)
    except (nbformat.ValidationError, KeyError, TypeError, AttributeError) as err:
        raise TitoError(f"{where} is not a valid notebook ({type(err).__name__})", hint) from None


def validate_metadata(notebook: nbformat.NotebookNode, origin: Path) -> None:
    """Fail loudly on cell headers jupytext could not parse or on incomplete nbgrader metadata."""
    for index, cell in enumerate(notebook.cells):
        meta = cell.get("metadata", {})
        if "incorrectly_encoded_metadata" in meta:
            raise TitoError(
                f"{origin}: cell {index} has a malformed header: "
                f"{meta['incorrectly_encoded_metadata']!r}",
                hint='write cell metadata as JSON, e.g. # %% nbgrader={"grade": false, ...}',
            )
        grader = meta.get("nbgrader")
        if grader is None:
            continue
        missing = NBGRADER_KEYS - set(grader)
        if missing or grader.get("schema_version") != 3:
            raise TitoError(
                f"{origin}: cell {index} nbgrader metadata is incomplete "
                f"(missing {sorted(missing)})",
                hint="nbgrader schema v3 needs grade, grade_id, locked, schema_version=3, "
                "solution and task",
            )
        if grader["grade"] and "points" not in grader:
            raise TitoError(f"{origin}: graded cell {grader['grade_id']} has no points")
        if BEGIN_SOLUTION in cell.source and not grader["solution"]:
            # nbgrader refuses to release such a cell ("Solution region detected in a
            # non-solution cell"); say which cell and how to fix it before anyone runs it
            raise TitoError(
                f"{origin}: cell {grader['grade_id']} holds a solution region but is not a "
                "solution cell",
                hint='set "solution": true and "locked": false in its nbgrader metadata',
            )


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def strip_solutions(code: str, module: CourseModule) -> str:
    """Replace each solution region with the uniform stub and drop hidden tests."""
    out: list[str] = []
    skipping = None
    for line in code.splitlines():
        marker = line.strip()
        if skipping:
            if marker == skipping:
                skipping = None
            continue
        if marker == BEGIN_SOLUTION:
            pad = _indent(line)
            out.append(f"{pad}# TODO: your code here (module {module.number:02d} {module.slug})")
            out.append(
                f'{pad}raise NotImplementedError("module {module.number:02d} {module.slug}: '
                f'write this part")'
            )
            skipping = END_SOLUTION
        elif marker == BEGIN_HIDDEN:
            skipping = END_HIDDEN
        else:
            out.append(line)
    if skipping:
        raise TitoError(f"module {module.name}: '{skipping}' is missing after an opening marker")
    return "\n".join(out)


def student_notebook(module: CourseModule, source: Path) -> nbformat.NotebookNode:
    """The release version of a module: every solution stubbed, every hidden test removed."""
    notebook = read_source(source)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source, module)
            cell.outputs = []
            cell.execution_count = None
    return notebook


def _split_regions(code: str) -> tuple[list[str], list[str]]:
    """(lines inside solution or hidden-test regions, lines outside), stripped, non-blank."""
    inside_lines, outside_lines, inside = [], [], False
    for line in code.splitlines():
        marker = line.strip()
        if marker in (BEGIN_SOLUTION, BEGIN_HIDDEN):
            inside = True
        elif marker in (END_SOLUTION, END_HIDDEN):
            inside = False
        elif marker:
            (inside_lines if inside else outside_lines).append(marker)
    return inside_lines, outside_lines


def secret_lines(notebook: nbformat.NotebookNode) -> set[str]:
    """Lines that stand only inside solution or hidden-test regions (what a leak check seeks).

    A line that also stands outside every region (a shared `return` line, say) is no secret.
    """
    secret, public = set(), set()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            inside, outside = _split_regions(cell.source)
            secret.update(inside)
            public.update(outside)
    return secret - public


# ast.parse is not thread-safe in CPython 3.11 (its recursion check is per interpreter), and
# `tito grade autograde --jobs` exports and checks submissions in threads while the main thread
# records verdicts through nbgrader (which builds syntax trees too, e.g. traitlets' literal
# values): every one of them holds this lock. Reentrant, so code run under it may parse.
_PARSING = threading.RLock()
AST_LOCK = _PARSING  # for other callers of ast.parse in threads (numpy's .npy header reader)


def parse_python(code: str) -> ast.Module:
    """ast.parse, one thread at a time; raises SyntaxError as ast.parse does."""
    with _PARSING:
        return ast.parse(code)


DIRECTIVE = re.compile(r"^#\|\s*(\w+)\s*(.*)$")


def directives(code: str) -> list[tuple[str, str]]:
    """nbdev-style `#| name args` lines of a cell."""
    found = []
    for line in code.splitlines():
        match = DIRECTIVE.match(line.strip())
        if match:
            found.append((match.group(1), match.group(2).strip()))
    return found
