"""A submitted notebook with cells that have no id (saved by an older Jupyter) is read without
nbformat's MissingIDFieldWarning, which names no notebook: autograde and similarity both read
submissions through tito/grading/submissions.py, so nothing anonymous reaches the terminal."""

from __future__ import annotations

import json
import warnings

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tito.grading import submissions


def test_cells_without_ids_are_read_without_an_anonymous_warning():
    nb = new_notebook(cells=[new_markdown_cell("hi"), new_code_cell("x = 1"), new_code_cell("y")])
    raw = json.loads(nbformat.writes(nb))
    raw["cells"][1]["id"] = "cell-3"  # an id a student's notebook already uses
    del raw["cells"][0]["id"], raw["cells"][2]["id"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = submissions.parse_notebook(json.dumps(raw).encode(), "student.ipynb")
    ids = [cell.id for cell in read.cells]
    assert len(set(ids)) == 3 and ids[1] == "cell-3"
    assert [cell.source for cell in read.cells] == ["hi", "x = 1", "y"]
    nbformat.validate(read)
