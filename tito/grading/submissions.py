"""A student's submission, read as untrusted input: only regular files, never followed links, and
a notebook checked by tito, within fixed bounds, before nbformat, nbgrader or the static check
see it. Anything else makes that one submission ungradable, with a one-line reason
(a TitoError), and grading goes on with the next student.
"""

from __future__ import annotations

import ast
import json
import os
import stat
from pathlib import Path

import nbformat

from tito.curriculum.notebooks import parse_python
from tito.errors import TitoError
from tito.sandbox.limits import (  # the bounds of a submission, in the one table
    CODE_CHARS,
    CODE_DEPTH,
    FOLDER_ENTRIES,
    JSON_DEPTH,
    NOTEBOOK_BYTES,
    NOTEBOOK_CELLS,
    NOTEBOOK_OUTPUTS,
)
from tito.sandbox.npzwire import json_depth

CELL_TYPES = ("code", "markdown", "raw")
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


def _kind(mode: int) -> str:
    """What a file system entry is, in words (for a non-regular one)."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_folder(folder: Path, shown: str) -> None:
    """`folder` (shown as `shown`) is a real folder holding only regular files and real
    folders: nothing nbgrader would follow or copy into autograded/ and feedback/ is a link, a
    pipe or a device."""
    for path in (folder.parent, folder):
        mode = os.lstat(path).st_mode
        if not stat.S_ISDIR(mode):
            what = shown if path == folder else path.name
            raise TitoError(f"{what} is {_kind(mode)}, not a folder; a submission holds only "
                            "regular files and folders")  # fmt: skip
    seen = 0
    todo = [folder]
    while todo:
        with os.scandir(todo.pop()) as entries:
            for entry in entries:
                seen += 1
                if seen > FOLDER_ENTRIES:
                    raise TitoError(f"{shown} holds more than {FOLDER_ENTRIES} files")
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    todo.append(Path(entry.path))
                elif not stat.S_ISREG(mode):
                    where = Path(entry.path).relative_to(folder.parent)
                    raise TitoError(
                        f"{where} is {_kind(mode)}; a submission holds only regular files "
                        "(remove it and grade again)"
                    )


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes, at most NOTEBOOK_BYTES: a link is not followed, a pipe or
    device is never opened for reading (so it cannot block), and what is read is what was
    checked (fstat of the open file)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise TitoError(f"no notebook at {path}") from None
    if not stat.S_ISREG(mode):
        raise TitoError(f"{path.name} is {_kind(mode)}, not a notebook file")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise TitoError(f"{path.name} cannot be read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TitoError(f"{path.name} is not a regular file")
        data = handle.read(NOTEBOOK_BYTES + 1)
    if len(data) > NOTEBOOK_BYTES:
        raise TitoError(f"{path.name} is larger than {NOTEBOOK_BYTES // 2**20} MiB")
    return data


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value) -> bool:
    """nbformat's multiline string: a str, or a list of str."""
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    )


def _check_cell(index: int, cell) -> None:
    where = f"cell {index + 1}"
    if not isinstance(cell, dict):
        raise TitoError(f"{where} is a {type(cell).__name__}, not a cell")
    if cell.get("cell_type") not in CELL_TYPES:
        raise TitoError(f"{where} has cell_type {cell.get('cell_type')!r}, not code/markdown/raw")
    if not _text(cell.get("source")):
        raise TitoError(f"{where}'s source is not text")
    if not isinstance(cell.get("metadata", {}), dict):
        raise TitoError(f"{where}'s metadata is not a mapping")
    grader = cell.get("metadata", {}).get("nbgrader", {})
    if not isinstance(grader, dict):
        raise TitoError(f"{where}'s nbgrader metadata is not a mapping")
    if "grade_id" in grader and not isinstance(grader["grade_id"], str):
        raise TitoError(f"{where}'s grade id is not a string")
    if "points" in grader and not (
        isinstance(grader["points"], (int, float)) and not isinstance(grader["points"], bool)
    ):
        raise TitoError(f"{where}'s points are not a number")
    for flag in ("grade", "solution", "locked", "task"):
        if flag in grader and not isinstance(grader[flag], bool):
            raise TitoError(f"{where}'s nbgrader '{flag}' is not true or false")
    if cell["cell_type"] != "code":
        return
    outputs = cell.get("outputs", [])
    if not isinstance(outputs, list) or not all(
        isinstance(o, dict) and o.get("output_type") in OUTPUT_TYPES for o in outputs
    ):
        raise TitoError(f"{where}'s outputs are not a list of outputs")
    count = cell.get("execution_count")
    if count is not None and not _is_int(count):
        raise TitoError(f"{where}'s execution_count is not a number")


def _check_code(index: int, code: str) -> None:
    """Code tito itself will read (the static check parses it): bounded in size and in depth,
    so no parser or tree walk of tito's can run out of stack or memory on it. A syntax error is
    the student's to lose points on, not a reason to refuse the notebook."""
    where = f"cell {index + 1}"
    if len(code) > CODE_CHARS:
        raise TitoError(f"{where} holds {len(code)} characters of code (the limit is {CODE_CHARS})")
    if "\0" in code:
        raise TitoError(f"{where} holds a NUL character")
    try:
        tree = parse_python(code)
    except SyntaxError:
        return
    except (RecursionError, MemoryError, ValueError) as err:
        raise TitoError(f"{where}'s code cannot be read ({type(err).__name__})") from None
    deepest, todo = 0, [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if deepest > CODE_DEPTH:
            raise TitoError(
                f"{where}'s code nests more than {CODE_DEPTH} levels deep (a long chain like "
                "a + b + c + ... counts one level per term)"
            )
        todo.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def parse_notebook(data: bytes, name: str) -> nbformat.NotebookNode:
    """A notebook from untrusted bytes, or a TitoError with one line saying what is wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TitoError(f"{name} is not UTF-8 text (byte {err.start})") from None
    try:
        raw = json.loads(text)
    except RecursionError:
        raise TitoError(f"{name} nests deeper than {JSON_DEPTH} levels") from None
    except ValueError as err:
        raise TitoError(f"{name} is not a valid notebook (not JSON: {err})") from None
    depth = json_depth(raw, JSON_DEPTH)
    if depth > JSON_DEPTH:
        raise TitoError(f"{name} nests deeper than {JSON_DEPTH} levels")
    if not isinstance(raw, dict):
        raise TitoError(f"{name} is not a valid notebook (JSON, but not an object)")
    version, minor = raw.get("nbformat"), raw.get("nbformat_minor")
    if not _is_int(version) or version != 4:
        raise TitoError(f"{name} has nbformat {version!r}; tito reads version 4 notebooks")
    if not _is_int(minor) or not 0 <= minor <= nbformat.v4.nbformat_minor:
        raise TitoError(
            f"{name} has nbformat_minor {minor!r}; tito reads 4.0 to 4.{nbformat.v4.nbformat_minor}"
        )
    if not isinstance(raw.get("metadata", {}), dict):
        raise TitoError(f"{name}'s metadata is not a mapping")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise TitoError(f"{name} is not a valid notebook (no list of cells)")
    if len(cells) > NOTEBOOK_CELLS:  # nbformat and nbgrader take about 0.2 ms per cell
        raise TitoError(
            f"{name} has {len(cells)} cells; a submission may have at most {NOTEBOOK_CELLS} "
            "(the module's own notebook has under 50)"
        )
    outputs = sum(len(c.get("outputs", [])) for c in cells if isinstance(c, dict)
                  and isinstance(c.get("outputs", []), list))  # fmt: skip
    if outputs > NOTEBOOK_OUTPUTS:
        raise TitoError(
            f"{name} holds {outputs} outputs; a submission may hold at most {NOTEBOOK_OUTPUTS} "
            "(clear the outputs and submit again)"
        )
    for index, cell in enumerate(cells):
        _check_cell(index, cell)
    if minor >= 5 and _give_ids(cells):
        text = json.dumps(raw)
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except nbformat.ValidationError as err:
        first = str(err).strip().splitlines()[0][:200]
        raise TitoError(f"{name} is not a valid notebook: {first}") from None
    except Exception as err:  # nbformat on input it was not written for: still one line
        raise TitoError(f"{name} is not a valid notebook ({type(err).__name__})") from None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade_id"):
            _check_code(index, cell.source)
    return nb


def _give_ids(cells: list) -> bool:
    """Give each cell without an id (a notebook saved by an older Jupyter) one of its own, as
    nbformat would: nbformat's warning about it names no notebook, so with a class of forty the
    instructor could not tell whose it was, and the id changes nothing of a grade."""
    taken = {cell.get("id") for cell in cells if isinstance(cell, dict)}
    given = False
    for index, cell in enumerate(cells):
        if isinstance(cell, dict) and "id" not in cell:
            new = f"cell-{index + 1}"
            while new in taken:
                new += "-"
            cell["id"], given = new, True
            taken.add(new)
    return given


def read_submission(notebook: Path) -> nbformat.NotebookNode:
    """The notebook at submitted/<student>/<assignment>/<slug>.ipynb, checked as above."""
    folder = notebook.parent
    student = folder.parent.name
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in student):
        raise TitoError("the student folder's name holds control characters")
    check_folder(folder, f"{student}/{folder.name}")
    return parse_notebook(read_bytes(notebook), notebook.name)
