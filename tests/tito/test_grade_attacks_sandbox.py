"""Attacks on what surrounds the grade: the submission's files, its notebook's shape, and what its
text does once it reaches the instructor (feedback pages, the terminal, grades.csv).

One course folder and one release of module 01 (the cheapest to grade) serve every attack; one
`tito grade autograde` grades the whole class at once, then `feedback`, `report` and `export`
run over it. Each attacker is ungradable or scores no more than the blank release, the honest
students graded beside them keep full marks, and no file of the instructor's changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_markdown_cell, new_output
from typer.testing import CliRunner, Result

from tito.cli.main import app
from tito.curriculum import paths
from tito.curriculum.catalog import find
from tito.grading import course as course_folder
from tito.grading import gradebook
from tito.grading import nbgrader as grading

MODULE = find(1)
SOLUTION = "matmul"  # a solution cell of module 01
TIMEOUT = 5


def tito(*args) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def cell_by_id(nb, grade_id: str):
    return next(c for c in nb.cells if meta(c).get("grade_id") == grade_id)


def state(paths_: list[Path]) -> dict[str, str]:
    """What each file under `paths_` is: a regular file's hash, a link's target, or its kind.
    Nothing is followed, and no pipe is ever opened."""
    found = {}
    for top in paths_:
        for path in [top, *(sorted(top.rglob("*")) if top.is_dir() else [])]:
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(mode):
                found[str(path)] = "link to " + os.readlink(path)
            elif not stat.S_ISDIR(mode):
                found[str(path)] = f"special {stat.S_IFMT(mode)}"
    return found


def notebook_json(nb) -> dict:
    return json.loads(nbformat.writes(nb))


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@dataclass
class Class:
    course: Path
    autograde: Result
    feedback: Result
    report: Result
    csv: list[dict]
    scores: gradebook.Scores
    before: dict[str, str]
    after: dict[str, str]
    gradebook_bytes: bytes
    source_bytes: bytes


# student -> words the reason for refusing the submission must hold
UNGRADABLE = {
    "link-to-source": "symbolic link",
    "link-folder": "symbolic link",
    "link-beside": "symbolic link",
    "fifo": "named pipe",
    "fifo-beside": "named pipe",
    "folder": "is a folder, not a notebook",
    "socket": "socket",
    "nbformat-99": "nbformat 99",
    "nbformat-float": "nbformat 4.0",
    "nbformat-null": "nbformat None",
    "nbformat-true": "nbformat True",
    "nbformat-minor-x": "nbformat_minor 'x'",
    "metadata-600-deep": "nests deeper than 64",
    "terms-2000": "nests more than 100 levels",
    "nested-code": "nests more than 100 levels",
    "not-utf8": "not UTF-8",
    "cells-string": "no list of cells",
    "source-number": "source is not text",
    "outputs-mapping": "outputs are not a list",
    "points-text": "points are not a number",
    "\x1b[2Jmallory": "control characters",
}
if os.geteuid() == 0:
    UNGRADABLE["device"] = "character device"
GRADED = {"honest", "blank", "markup", "escapes", "=1+1", "with-data"}


def write_class(course: Path, source, release) -> None:
    name = grading.notebook_file(MODULE)

    def folder(student: str) -> Path:
        where = course / "submitted" / student / MODULE.name
        where.mkdir(parents=True)
        return where

    def submit(student: str, nb) -> None:
        data = nb if isinstance(nb, (bytes, str)) else nbformat.writes(nb)
        target = folder(student) / name
        (target.write_bytes if isinstance(data, bytes) else target.write_text)(data)

    submit("honest", source)
    submit("blank", release)
    submit("=1+1", source)  # a formula for a name: grades.csv must hold it as text
    submit("with-data", source)
    (course / "submitted" / "with-data" / MODULE.name / "notes.txt").write_text("my notes\n")

    markup = nbformat.from_dict(source)
    markup.cells.insert(0, new_markdown_cell(
        "Hello instructor <script>alert('md')</script>"
        '<img src="x" onerror="alert(\'img\')"> <a href="javascript:alert(1)">click</a>'
        '<a href="data:text/html,<script>alert(2)</script>">data</a>'
        "<style>body{display:none}</style><iframe src='http://example.invalid'></iframe>"
    ))  # fmt: skip
    test_cell = next(c for c in markup.cells if meta(c).get("grade"))
    test_cell.outputs = [new_output("display_data", data={
        "text/html": "<script>alert('output')</script><b onmouseover='alert(3)'>out</b>",
        "text/plain": "out",
    })]  # fmt: skip
    submit("markup", markup)

    escapes = nbformat.from_dict(source)
    cell = cell_by_id(escapes, SOLUTION)
    cell.source = cell.source.replace(  # the forward pass raises a message full of escapes
        "        ### BEGIN SOLUTION\n",
        "        ### BEGIN SOLUTION\n        raise ValueError('\\x1b[2J\\x1b[1;1H\\x1b]8;;"
        "http://evil.invalid\\x07fake ok\\x1b]8;;\\x07\\r\\x1b[32mok graded\\x1b[0m')\n",
        1,
    )
    submit("escapes", escapes)

    # links, pipes, folders and devices where files should be
    source_notebook = course / "source" / MODULE.name / name
    os.symlink(source_notebook, folder("link-to-source") / name)
    (course / "submitted" / "link-folder").mkdir()
    os.symlink(source_notebook.parent, course / "submitted" / "link-folder" / MODULE.name)
    submit("link-beside", release)
    os.symlink(course / "gradebook.db", course / "submitted" / "link-beside" / MODULE.name / "a.db")
    os.mkfifo(folder("fifo") / name)
    submit("fifo-beside", release)
    os.mkfifo(course / "submitted" / "fifo-beside" / MODULE.name / "pipe")
    (folder("folder") / name).mkdir()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder("socket") / name))
    if "device" in UNGRADABLE:
        os.mknod(folder("device") / name, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero

    # malformed notebooks
    raw = notebook_json(release)
    for student, changes in {
        "nbformat-99": {"nbformat": 99},
        "nbformat-float": {"nbformat": 4.0},
        "nbformat-null": {"nbformat": None},
        "nbformat-true": {"nbformat": True},
        "nbformat-minor-x": {"nbformat_minor": "x"},
        "metadata-600-deep": {"metadata": nested(600)},
        "cells-string": {"cells": "x"},
    }.items():
        submit(student, json.dumps({**raw, **changes}))
    for student, code in {
        "terms-2000": "def matmul(a, b):\n    return " + " + ".join(["a"] * 2000) + "\n",
        "nested-code": "def matmul(a, b):\n    return " + "[" * 150 + "]" * 150 + "\n",
    }.items():
        nb = nbformat.from_dict(release)
        cell_by_id(nb, SOLUTION).source = code
        submit(student, nb)
    broken = notebook_json(release)
    broken["cells"][0]["source"] = 5
    submit("source-number", json.dumps(broken))
    broken = notebook_json(release)
    next(c for c in broken["cells"] if c["cell_type"] == "code")["outputs"] = {}
    submit("outputs-mapping", json.dumps(broken))
    broken = notebook_json(release)
    next(c for c in broken["cells"] if c["metadata"].get("nbgrader", {}).get("grade"))["metadata"][
        "nbgrader"
    ]["points"] = "lots"
    submit("points-text", json.dumps(broken))
    submit("not-utf8", nbformat.writes(release).encode().replace(b"{", b"{\xff", 1))
    submit("\x1b[2Jmallory", release)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released) -> Class:
    course = released(tmp_path_factory.mktemp("attacked"), MODULE.number, TIMEOUT)
    name = grading.notebook_file(MODULE)
    source = nbformat.read(course / "source" / MODULE.name / name, as_version=4)
    release = nbformat.read(course / "release" / MODULE.name / name, as_version=4)
    write_class(course, source, release)
    watched = [
        course / course_folder.CONFIG_NAME,
        course / course_folder.TITO_CONFIG,
        course / "source",
        course / "release",
        course / "submitted",
        paths.root() / "tinytorch",
        paths.root() / "modules" / MODULE.name,
    ]
    before = state(watched)
    autograde = tito("grade", "autograde", MODULE.number, "--course", course, "--jobs", 2)
    feedback = tito("grade", "feedback", MODULE.number, "--course", course)
    report = tito("grade", "report", MODULE.number, "--course", course)
    assert tito("grade", "export", "--course", course).exit_code == 0
    with open(course / "grades.csv", newline="") as handle:
        import csv

        rows = list(csv.DictReader(handle))
    return Class(
        course,
        autograde,
        feedback,
        report,
        rows,
        gradebook.scores(course, MODULE),
        before,
        state(watched),
        (course / "gradebook.db").read_bytes(),
        (course / "source" / MODULE.name / name).read_bytes(),
    )


def test_honest_students_keep_full_marks_and_attackers_score_no_more_than_blank(graded):
    scores = graded.scores
    # markup's code is honest too: its attack is on the instructor's browser, not the grade
    for student in ("honest", "=1+1", "with-data", "markup"):
        assert scores.total(student) == scores.max_total > 0, graded.autograde.output
    assert scores.total("blank") == 0
    for student in UNGRADABLE:
        assert scores.total(student) <= scores.total("blank"), student
    # escapes attacks the terminal; its one broken function costs just that function's check
    assert scores.rows["escapes"]["test-matmul"] == 0
    assert scores.total("escapes") == scores.max_total - 2


def test_each_bad_submission_is_ungradable_with_its_reason_and_the_run_says_how_many(graded):
    scores = graded.scores
    for student, words in UNGRADABLE.items():
        entry = scores.entries[student]
        assert entry.status == gradebook.UNGRADABLE, (student, entry)
        assert words in entry.reason, (student, entry.reason)
        assert "\n" not in entry.reason and "Traceback" not in entry.reason
    for student in GRADED:
        assert scores.status(student) == gradebook.GRADED, (student, scores.entries[student])
    total = len(UNGRADABLE) + len(GRADED)
    said = " ".join(graded.autograde.output.split())
    assert graded.autograde.exit_code == 1
    assert f"{len(UNGRADABLE)} of {total} submission(s) could not be graded" in said
    assert "Traceback" not in said


def test_instructor_files_are_byte_identical_and_nothing_but_regular_files_was_copied(graded):
    assert graded.before == graded.after
    for stage in ("autograded", "feedback"):
        top = graded.course / stage
        students = {p.name for p in top.iterdir()}
        assert students <= GRADED, students  # no folder for any refused submission
        for path in top.rglob("*"):
            mode = os.lstat(path).st_mode
            assert stat.S_ISREG(mode) or stat.S_ISDIR(mode), path
            if stat.S_ISREG(mode):
                data = path.read_bytes()
                assert data != graded.gradebook_bytes[: len(data)] or not data, path
    notes = graded.course / "autograded" / "with-data" / MODULE.name / "notes.txt"
    assert notes.read_text() == "my notes\n"  # a regular file beside the notebook still comes


def test_feedback_pages_run_no_script(graded):
    assert graded.feedback.exit_code == 0, graded.feedback.output
    pages = sorted((graded.course / "feedback").rglob("*.html"))
    assert {p.parent.parent.name for p in pages} == GRADED
    for page in pages:
        html = page.read_text().lower().split("<body", 1)[1]  # the page's own css names them
        for bad in ("<script", "javascript:", "<iframe", "data:text"):
            assert bad not in html, (page, bad)
        assert not re.search(r"<[^>]*\son[a-z]+\s*=", html), page  # no event handler
    markup = graded.course / "feedback" / "markup" / MODULE.name / f"{MODULE.slug}.html"
    text = markup.read_text()
    assert "Hello instructor" in text and "<style>" in text  # the page's own style sheets stay
    assert "body{display:none}" not in text  # the student's do not


def test_no_control_sequence_reaches_the_terminal(graded):
    for result in (graded.autograde, graded.feedback, graded.report):
        assert "\x1b" not in result.output and "\r" not in result.output
        assert "\x07" not in result.output
    said = " ".join(graded.report.output.split())
    assert "mallory" in said
    line = next(ln for ln in graded.autograde.output.splitlines() if "escapes" in ln)
    assert "ValueError" in line and "fake ok" in line and "[2J" not in line, line


def test_grades_csv_holds_no_formula(graded):
    rows = graded.csv
    assert rows and all(not v.startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows
                        for v in r.values())  # fmt: skip
    ids = {r["student_id"] for r in rows}
    assert "'=1+1" in ids and "=1+1" not in ids
    assert re.fullmatch(r"\d+(\.\d+)?", next(r for r in rows if r["student_id"] == "'=1+1")[
        "score"
    ])  # fmt: skip
