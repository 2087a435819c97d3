"""Grades that are fair to honest code: a harmless import costs nothing, a refused cell costs its
own checks only and marks the submission for a person to read, a lost check names the function
whose result was wrong, a valid float32 reformulation scores full marks, and a changed cell
flag or a cell without an id neither stops nbgrader nor clutters the instructor's terminal.

Module 01 and module 02 are graded once each, every case a student of that one class.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tito.curriculum import refusals
from tito.curriculum.catalog import find
from tito.grading import gradebook
from tito.grading import nbgrader as grading


def meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def cell_of(nb, grade_id: str):
    return next(c for c in nb.cells if meta(c).get("grade_id") == grade_id)


def edited(source, grade_id: str, old: str, new: str, where: str = "replace"):
    """The reference (the source notebook) with one edit in one solution cell."""
    nb = nbformat.from_dict(source)
    cell = cell_of(nb, grade_id)
    if where == "top":
        cell.source = new + cell.source
    else:
        assert old in cell.source, (grade_id, old)
        cell.source = cell.source.replace(old, new)
    return nb


@dataclass
class Class:
    course: Path
    outcomes: dict[str, grading.Outcome]
    scores: gradebook.Scores
    warned: list[str]


def grade(course: Path, number: int, students: dict) -> Class:
    module = find(number)
    name = grading.notebook_file(module)
    for student, nb in students.items():
        target = course / "submitted" / student / module.name / name
        target.parent.mkdir(parents=True)
        if isinstance(nb, str):
            target.write_text(nb)
        else:
            nbformat.write(nb, target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcomes = {o.student: o for o in grading.autograde(course, module, jobs=2)}
    warned = [type(w.message).__name__ for w in caught]
    return Class(course, outcomes, gradebook.scores(course, module), warned)


def source_of(course: Path, number: int):
    module = find(number)
    return nbformat.read(course / "source" / module.name / grading.notebook_file(module), 4)


@pytest.fixture(scope="module")
def tensor_class(tmp_path_factory, released) -> Class:
    course = released(tmp_path_factory.mktemp("fair01") / "course", 1)
    source = source_of(course, 1)
    bob2 = edited(source, "elementwise", "return (grad / self.a,)", "return (grad * self.a,)")
    bob2 = edited(bob2, "reductions", "return (grad * share,)", "return (grad * share * 0.5,)")
    meta_changed = nbformat.from_dict(source)
    meta(cell_of(meta_changed, "matmul")).update(grade=True, points=50)
    unlocked = nbformat.from_dict(source)
    meta(cell_of(unlocked, "test-matmul")).update(locked=False, solution=True, grade=False)
    no_ids = nbformat.writes(source)
    no_ids = re.sub(r'\n\s*"id": "[^"]*",', "", no_ids)
    assert '"id"' not in no_ids
    students = {
        "reference": source,
        "frank": edited(source, "reductions", "", "import numpy as np\n", "top"),
        "grace": edited(source, "matmul", "", "import math\nimport os\n", "top"),
        "bob2": bob2,
        "meta_changed": meta_changed,
        "unlocked": unlocked,
        "no_ids": no_ids,
    }
    return grade(course, 1, students)


@pytest.fixture(scope="module")
def activations_class(tmp_path_factory, released) -> Class:
    course = released(tmp_path_factory.mktemp("fair02") / "course", 2)
    source = source_of(course, 2)
    tanh = edited(source, "pointwise",
                  "self.out = np.where(x >= 0, 1, e) / (1 + e)",
                  "self.out = (0.5 * (1 + np.tanh(0.5 * x))).astype(x.dtype)")  # fmt: skip
    slip = edited(source, "pointwise", "return (grad * self.out * (1 - self.out),)",
                  "return (grad * self.out,)")  # fmt: skip
    return grade(course, 2, {"reference": source, "tanh": tanh, "slip": slip})


def lost(outcome: grading.Outcome) -> dict[str, str]:
    return {c.grade_id: c.reason for c in outcome.checks if not c.passed}


def test_importing_numpy_as_np_again_is_no_rebinding(tensor_class: Class):
    frank = tensor_class.outcomes["frank"]
    assert frank.ok and lost(frank) == {} and frank.message == ""
    assert tensor_class.scores.total("frank") == tensor_class.scores.max_total
    assert tensor_class.scores.status("frank") == gradebook.GRADED


def test_a_refused_cell_costs_its_checks_only_and_asks_for_a_person(tensor_class: Class):
    grace = tensor_class.outcomes["grace"]
    assert grace.ok
    assert list(lost(grace)) == ["test-matmul"]
    assert "`import os` is not allowed" in lost(grace)["test-matmul"]
    assert lost(grace)["test-matmul"].startswith("MatMul.forward, MatMul.backward (cell 'matmul')")
    assert grace.message.startswith("needs manual grading: not run: solution cell 'matmul'")
    scores = tensor_class.scores
    assert scores.status("grace") == gradebook.MANUAL
    assert "refused solution cell(s) 'matmul'" in scores.entries["grace"].reason
    assert scores.total("grace") == scores.max_total - dict(scores.cells)["test-matmul"]
    written = gradebook.export_csv(tensor_class.course).read_text()
    assert any(
        line.split(",")[3] == "grace" and ",needs manual grading," in line
        for line in written.splitlines()
    )


def test_a_lost_check_names_the_function_whose_result_was_wrong(tensor_class: Class):
    bob2 = lost(tensor_class.outcomes["bob2"])
    assert bob2["test-arithmetic"].startswith("Log.backward (cell 'elementwise'): ")
    assert bob2["test-reductions"].startswith("Max.backward (cell 'reductions'): ")


def test_changed_cell_flags_are_graded_with_the_releases(tensor_class: Class):
    scores = tensor_class.scores
    for student, cell, fields in [
        ("meta_changed", "matmul", "(grade, points)"),
        ("unlocked", "test-matmul", "(grade, solution, locked)"),
    ]:
        outcome = tensor_class.outcomes[student]
        assert outcome.ok, outcome.message
        assert f"('{cell}') had its nbgrader metadata changed {fields}" in outcome.message
        assert "copy the cell from the release notebook" in outcome.message
        assert scores.total(student) == scores.max_total
        assert scores.status(student) == gradebook.GRADED


def test_cells_without_ids_grade_without_a_warning(tensor_class: Class):
    assert tensor_class.outcomes["no_ids"].ok
    assert tensor_class.scores.total("no_ids") == tensor_class.scores.max_total
    assert "MissingIDFieldWarning" not in tensor_class.warned
    assert tensor_class.scores.total("reference") == tensor_class.scores.max_total


def test_sigmoid_through_tanh_scores_full_marks(activations_class: Class):
    scores = activations_class.scores
    assert scores.total("reference") == scores.max_total
    assert lost(activations_class.outcomes["tanh"]) == {}
    assert scores.total("tanh") == scores.max_total


def test_a_differing_value_names_the_function_that_made_it(activations_class: Class):
    slip = lost(activations_class.outcomes["slip"])
    assert list(slip) == ["test-pointwise"]
    assert slip["test-pointwise"].startswith("SigmoidFunction.backward (cell 'pointwise'): ")
    assert "'dsigmoid' differs from the reference" in slip["test-pointwise"]


@pytest.mark.parametrize(
    "code",
    ["import numpy as np", "import numpy as np\nimport math", "import numpy\nx = numpy.ones(2)"],
)
def test_importing_what_the_course_imports_is_allowed(code):
    assert (
        refusals.forbidden(code, set(), {"np", "numpy"}, {"np": "numpy", "numpy": "numpy"}) is None
    )


@pytest.mark.parametrize(
    "code",
    [
        "import numpy.linalg as np",
        "from numpy import linalg as np",
        "import math as np",
        "import numpy as np\nnp = None",
        "def f():\n    global np\n    import numpy as np",
    ],
)
def test_rebinding_to_anything_else_is_refused(code):
    why = refusals.forbidden(code, set(), {"np"}, {"np": "numpy"})
    assert why is not None and "redefines `np`" in why
