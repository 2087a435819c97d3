"""Two mends to what nbgrader does with a submitted notebook (tito/grading/nbgrader.py):
nbgrader's own checks of a cell's metadata stop the whole submission when a student changes
one cell's flags, and nbformat warns on the instructor's terminal about every cell without an
id.
"""

from __future__ import annotations

import functools
import warnings

import nbformat
from nbformat.validator import MissingIDFieldWarning
from nbgrader.preprocessors import NbGraderPreprocessor

FLAGS = ("grade", "solution", "locked", "task")  # what nbgrader checks, with points and type


def _changed(cell, meta: dict, course: dict) -> list[str]:
    """The fields of a cell's nbgrader metadata that differ from the release's, as nbgrader
    reads them (a flag missing is false; points count on graded cells only)."""
    fields = [flag for flag in FLAGS if bool(meta.get(flag)) != bool(course.get(flag))]
    if course.get("grade") and meta.get("grade"):
        try:
            same = float(meta.get("points", 0)) == float(course.get("points", 0))
        except (TypeError, ValueError):
            same = False
        if not same:
            fields.append("points")
    elif meta.get("grade") and "points" in meta:
        fields.append("points")
    if cell.get("cell_type") != course.get("cell_type", cell.get("cell_type")):
        fields.append("cell_type")
    return fields


class RestoreCourseMetadata(NbGraderPreprocessor):
    """Before nbgrader's own checks: give each cell the release's nbgrader metadata for its
    grade id (a student who unlocks a test cell or makes a solution cell graded would stop
    nbgrader with a checksum error); the grade never depended on it (scoring.py takes the
    course's cells from the source). Each change is noted, one line, in `changed`."""

    def __init__(self, release: nbformat.NotebookNode, changed: list[str], **kwargs):
        super().__init__(**kwargs)
        self.course = {
            cell.metadata["nbgrader"]["grade_id"]: cell.metadata["nbgrader"]
            for cell in release.cells
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        }
        self.changed = changed

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader")
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        course = self.course.get(grade_id)
        if course is None:
            return cell, resources
        fields = _changed(cell, meta, course)
        if fields:
            cell.metadata["nbgrader"] = nbformat.from_dict(dict(course))
            self.changed.append(
                f"cell {index + 1} ('{grade_id}') had its nbgrader metadata changed "
                f"({', '.join(fields)}); graded with the release's (copy the cell from the "
                "release notebook to restore it)"
            )
        return cell, resources


def quiet_ids(run):
    """`run` with nbformat's MissingIDFieldWarning silenced: a submission saved by an older
    Jupyter has cells without ids, which nbformat fills in itself; the instructor need not
    read about it on every autograde."""

    @functools.wraps(run)
    def quiet(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            return run(*args, **kwargs)

    return quiet
