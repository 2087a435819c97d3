"""A planted slip costs its function's checks and nothing else (issue 35, item 4).

For each listed module, one realistic slip per solution cell (a sign, an axis, a missing epsilon
or scale, an off-by-one, a wrong transpose, a forgotten term), planted in the reference solution
and graded through the real autograde path (one course, two jobs): the slipped submission loses
points on at least one check that declares the slipped cell (`@graded(grades=...)`) and keeps
full marks on every other check. grades.csv names the lost checks as the reason.
"""

from __future__ import annotations

import csv

import nbformat
import pytest

from tito.curriculum.catalog import find
from tito.curriculum.program import declared
from tito.grading import course as course_folder
from tito.grading import gradebook
from tito.grading import nbgrader as grading

# module -> solution cell -> (text of the reference, the slip that replaces it once)
SLIPS = {
    1: {
        "elementwise": ("return a - b", "return b - a"),  # a sign
        "matmul": ("return a @ b", "return a @ np.swapaxes(b, -1, -2)"),  # a transpose
        "reductions": (  # the mean divided by every element, not the reduced axis's count
            "return np.mean(a, axis=self.axes, keepdims=keepdims)",
            "return np.sum(a, axis=self.axes, keepdims=keepdims) / a.size",
        ),
    },
    2: {
        "pointwise": ("np.where(x >= 0, 1, e) / (1 + e)", "np.where(x >= 0, e, 1) / (1 + e)"),
        "gelu": ("out = 0.5 * x * (1 + self.t)", "out = x * (1 + self.t)"),  # a scale
        "softmax": ("total = e.sum(axis=self.axis,", "total = e.sum(axis=0,"),  # an axis
    },
    12: {
        "masks": ("k=past_len + 1)", "k=past_len)"),  # an off-by-one
        "sdpa": (" / q.shape[-1] ** 0.5", ""),  # a missing scale
        "mha": ("merged = out.permute(0, 2, 1, 3).reshape(", "merged = out.reshape("),
    },
    13: {
        "layernorm": ("(variance + self.eps) ** 0.5", "variance**0.5"),  # a missing epsilon
        "mlp": ("self.linear2(self.gelu(self.linear1(x)))", "self.linear2(self.linear1(x))"),
        "block": (  # a forgotten residual
            "x = x + self.attention(self.ln1(x), mask)",
            "x = self.attention(self.ln1(x), mask)",
        ),
        "sample": ("logits.astype(np.float64) / temperature", "logits.astype(np.float64)"),
        "gpt": ("x = self.ln_f(x)", "x = x"),  # the final norm forgotten
    },
    17: {
        "cache": ("self._v[:, :, self.length : end] = v", "self._v[:, :, self.length : end] = k"),
        "bytes": ("return 2 * num_layers", "return num_layers"),  # K or V forgotten
        "attention": (" / np.sqrt(q.shape[-1])", ""),
        "forward": ("np.arange(past, past + steps)[None]", "np.arange(steps)[None]"),
        "generate": ("past < model.max_seq_len", "past <= model.max_seq_len"),
    },
}


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def slipped(source, cell_id: str, old: str, new: str):
    nb = nbformat.from_dict(source)
    cell = next(c for c in nb.cells if _meta(c).get("grade_id") == cell_id)
    assert cell.source.count(old) >= 1, f"{cell_id}: the reference no longer holds {old!r}"
    cell.source = cell.source.replace(old, new, 1)
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """module -> (check -> declared cells, slipped cell -> outcome, grades.csv rows)."""
    course = tmp_path_factory.mktemp("course")
    course_folder.init_course(course, timeout=20)
    found = {}
    for number, slips in SLIPS.items():
        module = find(number)
        grading.generate(course, module)
        name = grading.notebook_file(module)
        source = nbformat.read(course / "source" / module.name / name, as_version=4)
        for cell_id, (old, new) in slips.items():
            target = course / "submitted" / f"slip-{cell_id}" / module.name / name
            target.parent.mkdir(parents=True)
            nbformat.write(slipped(source, cell_id, old, new), target)
        outcomes = grading.autograde(course, module, jobs=2)
        checks = {
            _meta(c)["grade_id"]: declared(c.source)
            for c in source.cells
            if _meta(c).get("grade") and not _meta(c).get("solution")
        }
        found[number] = (checks, {o.student.removeprefix("slip-"): o for o in outcomes})
    gradebook.export_csv(course, course / "grades.csv")
    with open(course / "grades.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return found, rows


@pytest.mark.parametrize("number", sorted(SLIPS))
def test_a_slip_costs_the_checks_that_declare_its_cell_and_nothing_else(graded, number):
    checks, outcomes = graded[0][number]
    solutions = {cell for cells in checks.values() for cell in cells}
    assert set(SLIPS[number]) == solutions  # one slip for every solution cell
    for cell, outcome in outcomes.items():
        assert outcome.ok, (cell, outcome.message)
        lost = {c.grade_id for c in outcome.checks if not c.passed}
        declaring = {check for check, cells in checks.items() if cell in cells}
        assert lost, f"module {number}: the slip in '{cell}' cost nothing"
        assert lost <= declaring, f"module {number}: the slip in '{cell}' cost {lost - declaring}"
        for check in outcome.checks:
            if not check.passed:
                assert f"(cell '{cell}')" in check.reason, check.reason


def test_grades_csv_names_every_lost_check_and_its_function(graded):
    found, rows = graded
    outcome = found[13][1]["layernorm"]
    row = next(r for r in rows if r["student_id"] == "slip-layernorm" and "13" in r["assignment"])
    assert float(row["score"]) < float(row["max_score"])
    for check in outcome.checks:
        if not check.passed:
            assert f"{check.grade_id}: LayerNorm.forward (cell 'layernorm')" in row["reason"]
