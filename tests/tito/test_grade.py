"""tito grade end to end: a real nbgrader course folder, real kernels, the sqlite gradebook."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_output
from nbgrader.utils import determine_grade
from typer.testing import CliRunner, Result

from tito.cli.main import app
from tito.curriculum.catalog import CourseModule, find
from tito.grading import gradebook
from tito.grading import nbgrader as grading

# Per module: the solution cell a partial submission fills in, and the graded cells that then pass.
PARTIAL = {
    1: ("matmul", {"test-matmul"}),
    13: ("layernorm", {"test-layernorm", "test-layernorm-grad"}),
}
# the looping and broken submissions are only in module 01's course (the cheapest to grade)
ONLY_01 = pytest.mark.parametrize("course", [1], indirect=True, ids=["module01"])
TIMEOUT = 5  # seconds per cell; the looping submission costs this once per cell that loops


def tito(*args) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def said(result: Result) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def cell_by_id(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def inject(nb, grade_id: str, line: str):
    """A copy of nb with `line` at the start of every solution region of one cell."""
    nb = nbformat.from_dict(nb)
    cell = cell_by_id(nb, grade_id)
    cell.source = re.sub(
        r"^(\s*)### BEGIN SOLUTION$", rf"\g<0>\n\g<1>{line}", cell.source, flags=re.M
    )
    return nb


def submit(course: Path, module: CourseModule, student: str, nb) -> None:
    path = course / "submitted" / student / module.name / grading.notebook_file(module)
    path.parent.mkdir(parents=True)
    if isinstance(nb, str):
        path.write_text(nb)
    else:
        nbformat.write(nb, path)


@dataclass
class Course:
    module: CourseModule
    path: Path
    autograde: Result
    scores: gradebook.Scores

    def notebook(self, stage: str, student: str | None = None):
        parts = [stage, student] if student else [stage]
        path = self.path.joinpath(*parts, self.module.name, grading.notebook_file(self.module))
        return nbformat.read(path, as_version=4)


@pytest.fixture(scope="module", params=sorted(PARTIAL), ids=lambda n: f"module{n:02d}")
def course(request, tmp_path_factory, released) -> Course:
    module = find(request.param)
    folder = released(tmp_path_factory.mktemp(f"course{module.number:02d}"), module.number, TIMEOUT)

    source = nbformat.read(folder / "source" / module.name / grading.notebook_file(module), 4)
    release = nbformat.read(folder / "release" / module.name / grading.notebook_file(module), 4)
    filled, _ = PARTIAL[module.number]
    partial = nbformat.from_dict(release)
    cell_by_id(partial, filled).source = cell_by_id(source, filled).source
    noisy = inject(source, filled, "np.log(np.zeros(1))  # numpy: RuntimeWarning on stderr")
    cell_by_id(noisy, filled).source = (
        "import warnings\nwarnings.simplefilter('always')\n" + cell_by_id(noisy, filled).source
    )
    for student, nb in [
        ("reference", source),
        ("untouched", release),
        ("partial", partial),
        ("noisy", noisy),
    ]:
        submit(folder, module, student, nb)
    if module.number == 1:  # the slow and the broken cases once, on the cheapest module
        submit(folder, module, "looping", inject(source, filled, "while True: pass"))
        submit(folder, module, "broken", '{"cells": [ this is not json')
    graded = tito("grade", "autograde", module.number, "--course", folder)
    return Course(module, folder, graded, gradebook.scores(folder, module))


def test_partial_submission_gets_exactly_its_part(course: Course):
    # every submission of the class was graded (the reference's full marks and the blank
    # release's zero are test_grade_integrity's, on every module)
    assert {"reference", "untouched", "partial", "noisy"} <= set(course.scores.rows)
    _, passing = PARTIAL[course.module.number]
    assert passing <= {cell for cell, _ in course.scores.cells}
    for cell, points in course.scores.cells:
        assert course.scores.rows["partial"][cell] == (points if cell in passing else 0), cell


def test_warnings_on_stderr_cost_no_points(course: Course):
    assert course.scores.total("noisy") == course.scores.max_total
    graded = course.notebook("autograded", "noisy")
    shown = [
        out.get("text", "")
        for cell in graded.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
        for out in cell.outputs
    ]
    assert any("RuntimeWarning" in text for text in shown)  # still visible in the feedback


def test_stderr_preprocessor_turns_a_failing_grade_into_a_pass():
    cell = new_code_cell("f()", outputs=[new_output("stream", name="stderr", text="Warning: x\n")])
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 3, "grade_id": "t"}
    assert determine_grade(cell) == (0, 3)  # what nbgrader alone would do
    cell, _ = grading.StderrIsNotFailure().preprocess_cell(cell, {}, 0)
    assert determine_grade(cell) == (3, 3)
    cell.outputs.append(new_output("error", ename="AssertionError", evalue="", traceback=[]))
    assert determine_grade(cell) == (0, 3)  # a raised error still fails


def test_release_leaks_no_solution_or_hidden_test(course: Course, tmp_path: Path):
    name = grading.notebook_file(course.module)
    source = course.path / "source" / course.module.name / name
    release = course.path / "release" / course.module.name
    assert grading.find_leaks(source, release) == []
    text = (release / name).read_text()
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    # the check itself finds a planted solution line and a planted hidden test
    nb = nbformat.read(source, as_version=4)
    nb.cells.append(
        new_code_cell("### BEGIN HIDDEN TESTS\nassert secret_check()\n### END HIDDEN TESTS")
    )
    nbformat.write(nb, tmp_path / name)
    planted = tmp_path / "release"
    planted.mkdir()
    leaked = nbformat.read(release / name, as_version=4)
    filled, _ = PARTIAL[course.module.number]
    leaked.cells.append(new_code_cell(cell_by_id(nb, filled).source))
    leaked.cells.append(new_code_cell("assert secret_check()"))
    nbformat.write(leaked, planted / name)
    found = grading.find_leaks(tmp_path / name, planted)
    assert any("secret_check" in leak for leak in found)
    assert len(found) > 1


def test_export_csv_and_report(course: Course, tmp_path: Path):
    done = tito("grade", "export", "--course", course.path, "--to", tmp_path / "grades.csv")
    assert done.exit_code == 0, done.output
    with open(tmp_path / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert float(rows["reference"]["score"]) == float(rows["reference"]["max_score"])
    assert float(rows["untouched"]["score"]) == 0
    # autograde checked similarity: the reference's copies are flagged, the blank has no code
    assert rows["reference"]["similarity"].startswith("FLAGGED 1.00 with ")
    assert rows["partial"]["similarity"] == "FLAGGED 1.00 with (reference)"
    assert rows["untouched"]["similarity"] == ""
    summary = said(course.autograde)
    assert "similar code" in summary and "grades unchanged" in summary
    assert "the reference solution and partial: 1.00" in summary
    done = tito("grade", "report", course.module.number, "--course", course.path)
    assert done.exit_code == 0, done.output
    assert "reference" in done.output and f"{course.scores.max_total:g}" in done.output


def test_feedback_is_written_per_student(course: Course):
    done = tito(
        "grade", "feedback", course.module.number, "--course", course.path, "--student", "partial"
    )
    assert done.exit_code == 0, done.output
    html = course.path / "feedback" / "partial" / course.module.name
    assert (html / f"{course.module.slug}.html").read_text().count("<html") == 1


@ONLY_01
def test_infinite_loop_times_out_and_others_are_graded(course: Course):
    rows = course.scores.rows
    assert rows["looping"]["test-matmul"] == 0
    assert rows["looping"]["test-arithmetic"] == 2 and rows["looping"]["test-reductions"] == 2
    assert {"reference", "untouched", "partial", "noisy", "looping"} <= set(rows)


@ONLY_01
def test_malformed_submission_is_reported_and_the_rest_graded(course: Course):
    assert course.autograde.exit_code == 1
    assert "broken" in said(course.autograde) and "not a valid notebook" in said(course.autograde)
    assert "1 of 6 submission(s) could not be graded" in said(course.autograde)
    assert course.scores.status("broken") == gradebook.UNGRADABLE
    assert course.scores.total("broken") == 0 and "not a valid notebook" in (
        course.scores.entries["broken"].reason
    )


def test_bad_input_reads_as_one_clear_line(course: Course, tmp_path: Path):
    done = tito("grade", "autograde", course.module.number, "--course", course.path,
                "--student", "nobody")  # fmt: skip
    assert done.exit_code == 1 and "no submission from 'nobody'" in said(done)
    done = tito("grade", "autograde", 99, "--course", course.path)
    assert done.exit_code == 1 and "there is no module 99" in said(done)
    done = tito("grade", "generate", course.module.number, "--course", tmp_path)
    assert done.exit_code == 1 and "not a tito course folder" in said(done)
    assert "Traceback" not in said(done)
