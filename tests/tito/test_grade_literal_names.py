"""Student ids are literal names: a folder named like a pattern (`*`, `[0-9]*`, `?`, `a,b`)
is one student, graded on its own submission, and no other student's grade moves, in
autograde, the report, the export and sharded runs."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner, Result

from tito.cli.main import app
from tito.curriculum.catalog import find
from tito.errors import TitoError
from tito.grading import course, gradebook
from tito.grading import nbgrader as grading

MODULE = find(1)
NOTEBOOK = grading.notebook_file(MODULE)
HONEST = ["ada", "7up", "bob"]  # "7up" is what `[0-9]*` would match as a pattern
ATTACKERS = ["*", "[0-9]*", "?", "a,b", "[!a]*"]  # blank notebooks under pattern-like names


def tito(*args) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def grades(folder: Path) -> dict[str, tuple[float, str]]:
    scores = gradebook.scores(folder, MODULE)
    return {s: (scores.total(s), scores.status(s)) for s in scores.entries}


EXPECTED = {
    **{s: (6.0, gradebook.GRADED) for s in HONEST},
    **{s: (0.0, gradebook.GRADED) for s in ATTACKERS},
}


@pytest.fixture(scope="module")
def klass(tmp_path_factory, released) -> Path:
    folder = released(tmp_path_factory.mktemp("literal") / "course", 1, 10)
    source = nbformat.read(folder / "source" / MODULE.name / NOTEBOOK, 4)
    release = nbformat.read(folder / "release" / MODULE.name / NOTEBOOK, 4)
    for student in HONEST + ATTACKERS:
        path = course.notebook_path(folder, course.SUBMITTED, MODULE, student)
        path.parent.mkdir(parents=True)
        nbformat.write(source if student in HONEST else release, path)
    return folder


def test_pattern_names_grade_alone_in_autograde_report_and_export(klass: Path, tmp_path):
    done = tito("grade", "autograde", 1, "--course", klass)
    assert done.exit_code == 0, done.output
    assert grades(klass) == EXPECTED
    shown = tito("grade", "report", 1, "--course", klass)
    rows = {
        parts[0]: parts[-2:]
        for line in shown.output.splitlines()
        if line.startswith("│") and (parts := [p.strip() for p in line.strip("│").split("│")])[0]
    }
    for student, (total, _) in EXPECTED.items():
        assert rows[student][0] == f"{total:g}", (student, shown.output)
    assert tito("grade", "export", "--course", klass, "--to", tmp_path / "g.csv").exit_code == 0
    with open(tmp_path / "g.csv", newline="") as handle:
        got = {r["student_id"]: (float(r["score"]), r["status"]) for r in csv.DictReader(handle)}
    assert got == EXPECTED


def test_a_sharded_run_keeps_every_grade(klass: Path):
    for share in ("1/2", "2/2"):
        done = tito("grade", "autograde", 1, "--course", klass, "--shard", share)
        assert done.exit_code == 0, done.output
        assert grades(klass) == EXPECTED, share


def test_a_pattern_like_name_selects_only_that_student(klass: Path):
    assert grading.select_students([*HONEST, *ATTACKERS], ["*"]) == ["*"]
    assert grading.select_students([*HONEST, *ATTACKERS], ["[0-9]*"]) == ["[0-9]*"]
    done = tito("grade", "autograde", 1, "--course", klass, "--student", "[0-9]*")
    assert done.exit_code == 0, done.output
    assert "graded 7up" not in done.output and grades(klass) == EXPECTED
    done = tito("grade", "feedback", 1, "--course", klass, "--student", "*")
    assert done.exit_code == 0, done.output
    assert [line for line in done.output.splitlines() if line.startswith("ok")] == [
        line for line in done.output.splitlines() if line.startswith("ok *:")
    ]


def test_a_name_nbgrader_cannot_hold_is_refused_in_one_line(klass: Path):
    # nbgrader strips a student id: "bob " would be graded as, and into, bob
    path = course.notebook_path(klass, course.SUBMITTED, MODULE, "bob ")
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.read(klass / "release" / MODULE.name / NOTEBOOK, 4), path)
    try:
        done = tito("grade", "autograde", 1, "--course", klass)
        assert done.exit_code == 1
        said = " ".join(done.output.split())
        assert (
            "error: bob : the student folder 'bob ' under submitted/ begins or ends with a space"
            in said
            and "rename it to the student's id" in said
        )
        assert "1 of 9 submission(s) could not be graded" in said
        assert {s: g for s, g in grades(klass).items() if s != "bob "} == EXPECTED
    finally:
        shutil.rmtree(path.parent.parent)
    with pytest.raises(TitoError, match="longer than the 128"):
        course.check_student_name("x" * 129)
