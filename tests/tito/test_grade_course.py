"""The instructor's course folder: found like nbgrader finds it, configured by the instructor,
released for every module without leftovers, graded into a database server in shares, and
every student who submitted counted in the report and the export."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import sqlalchemy as sa
from nbformat.v4 import new_code_cell
from nbgrader.api import Gradebook
from typer.testing import CliRunner, Result

from tito.cli.main import app
from tito.curriculum.catalog import find
from tito.errors import TitoError
from tito.grading import course, gradebook
from tito.grading import nbgrader as grading

MODULE = find(1)  # the cheapest module to grade
NOTEBOOK = grading.notebook_file(MODULE)


def tito(*args, env: dict | None = None) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def said(result: Result | subprocess.CompletedProcess) -> str:
    text = result.output if isinstance(result, Result) else result.stdout + result.stderr
    return " ".join(text.split())


def installed_tito(*args, cwd: Path) -> subprocess.CompletedProcess:
    """The `tito` script pip installed, by absolute path, with no venv on PATH."""
    folders = [Path(sysconfig.get_path("scripts")), Path(sys.executable).parent]
    script = next(f / "tito" for f in folders if (f / "tito").exists())  # where pip put it
    env = {**os.environ, "PATH": "/usr/bin:/bin", "COLUMNS": "100"}
    return subprocess.run(
        [str(script), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True
    )


def init(folder: Path, *options) -> Path:
    done = tito("grade", "init", folder, *options)
    assert done.exit_code == 0, done.output
    return folder


def cell_of(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.fixture(scope="module")
def postgres_url(postgres):
    """A fresh database on the tests' server (tests/postgres_server.py), dropped afterwards."""
    engine = sa.create_engine(postgres, isolation_level="AUTOCOMMIT")
    name = f"tito_test_{uuid.uuid4().hex[:12]}"
    with engine.connect() as db:
        db.execute(sa.text(f"CREATE DATABASE {name}"))
    yield engine.url.set(database=name).render_as_string(hide_password=False)
    with engine.connect() as db:
        db.execute(sa.text(f"DROP DATABASE {name} WITH (FORCE)"))
    engine.dispose()


@dataclass
class Class:
    path: Path
    generated: subprocess.CompletedProcess
    shards: list[Result]
    scores: gradebook.Scores


STUDENTS = ["honest", "blank", "corrupt", "misnamed", "no_tests", "wrong_file"]


@pytest.fixture(scope="module")
def klass(tmp_path_factory, postgres_url) -> Class:
    """Module 01 for six kinds of submission, graded into PostgreSQL by two shards."""
    folder = init(tmp_path_factory.mktemp("class") / "course", "--timeout", 10)
    with open(folder / course.CONFIG_NAME, "a") as config:  # the instructor's own setting
        config.write(f'c.CourseDirectory.db_url = "{postgres_url}"\n')
    generated = installed_tito("grade", "generate", MODULE.number, cwd=folder)

    source = nbformat.read(folder / "source" / MODULE.name / NOTEBOOK, 4)
    release = nbformat.read(folder / "release" / MODULE.name / NOTEBOOK, 4)
    no_tests = nbformat.from_dict(source)
    no_tests.cells = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                      != "test-matmul"]  # fmt: skip
    for student, name, nb in [
        ("honest", NOTEBOOK, source),
        ("blank", NOTEBOOK, release),
        ("corrupt", NOTEBOOK, '{"cells": [ not json'),
        ("misnamed", f"{MODULE.slug} (1).ipynb", source),
        ("no_tests", NOTEBOOK, no_tests),
        ("wrong_file", f"{MODULE.slug}.py", "x = 1\n"),
    ]:
        path = folder / "submitted" / student / MODULE.name / name
        path.parent.mkdir(parents=True)
        path.write_text(nb) if isinstance(nb, str) else nbformat.write(nb, path)
    shards = [
        tito("grade", "autograde", 1, "--course", folder, "--shard", s) for s in ("1/2", "2/2")
    ]
    return Class(folder, generated, shards, gradebook.scores(folder, MODULE))


def test_runs_without_the_venv_on_path_inside_the_course_folder(klass: Class):
    # nbgrader's first gradebook access runs `alembic`, found beside the interpreter
    assert klass.generated.returncode == 0, said(klass.generated)
    assert f"released {klass.path / 'release' / MODULE.name}" in said(klass.generated)
    assert not (klass.path / "gradebook.db").exists()  # the gradebook is the server's


def test_nbgrader_tools_are_found_without_an_activated_venv(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    course.tools_on_path()
    found = shutil.which("alembic")
    assert found and subprocess.run([found, "--help"], capture_output=True).returncode == 0
    assert os.environ["PATH"].endswith("/usr/bin:/bin")


def test_shards_split_the_class_and_share_one_gradebook(klass: Class):
    graded = [set(re.findall(r"ok graded (\w+)", said(r))) for r in klass.shards]
    failed = [set(re.findall(r"error: (\w+):", said(r))) for r in klass.shards]
    seen = [g | f for g, f in zip(graded, failed)]
    assert seen[0] and seen[1] and not seen[0] & seen[1]
    assert seen[0] | seen[1] == set(STUDENTS)
    for share, students in zip((1, 2), seen):
        assert all(zlib.crc32(s.encode()) % 2 == share - 1 for s in students)
    with Gradebook(course.nbgrader_api(klass.path).coursedir.db_url, course.COURSE_ID) as gb:
        assert {s.student.id for s in gb.assignment_submissions(MODULE.name)} == graded[0] | graded[
            1
        ]


def test_every_submitter_is_counted_with_a_reason(klass: Class):
    entries = klass.scores.entries
    assert set(entries) == set(STUDENTS)
    assert entries["honest"].status == gradebook.GRADED
    assert klass.scores.total("honest") == klass.scores.max_total == 6
    assert entries["blank"].status == gradebook.GRADED and klass.scores.total("blank") == 0
    for student, reason in [
        ("corrupt", "is not a valid notebook"),
        (
            "misnamed",
            f"no notebook at submitted/misnamed/{MODULE.name}/{NOTEBOOK}; found "
            f"{MODULE.slug} (1).ipynb instead (nbgrader grades only {NOTEBOOK}",
        ),
        ("wrong_file", f"found {MODULE.slug}.py instead"),
    ]:
        assert entries[student].status == gradebook.UNGRADABLE, student
        assert reason in entries[student].reason and klass.scores.total(student) == 0
    assert entries["no_tests"].status == gradebook.MANUAL
    assert "test-matmul" in entries["no_tests"].reason
    assert klass.scores.rows["no_tests"] == {
        "test-arithmetic": 2,
        "test-matmul": 0,
        "test-reductions": 2,
    }


def test_export_lists_everyone_with_status_and_reason(klass: Class, tmp_path: Path):
    done = tito("grade", "export", "--course", klass.path, "--to", tmp_path / "grades.csv")
    assert done.exit_code == 0, done.output
    with open(tmp_path / "grades.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["assignment"] for r in rows} == {MODULE.name}
    got = {r["student_id"]: (float(r["score"]), float(r["max_score"]), r["status"]) for r in rows}
    assert got == {
        "honest": (6, 6, "graded"),
        "blank": (0, 6, "graded"),
        "corrupt": (0, 6, "ungradable"),
        "misnamed": (0, 6, "ungradable"),
        "wrong_file": (0, 6, "ungradable"),
        "no_tests": (4, 6, "needs manual grading"),
    }
    reasons = {r["student_id"]: r["reason"] for r in rows}
    assert "not a valid notebook" in reasons["corrupt"] and "test-matmul" in reasons["no_tests"]


@pytest.mark.parametrize("width", [80, 200])
def test_report_fits_the_terminal_and_stays_exact(klass: Class, width: int):
    done = tito("grade", "report", 1, "--course", klass.path, env={"COLUMNS": str(width)})
    assert done.exit_code == 0, done.output
    table = [line for line in done.output.splitlines() if line.startswith(("│", "┃"))]
    assert table and max(len(line) for line in table) <= width
    cells = {
        parts[0]: parts[1:]
        for line in table
        if (parts := [p.strip() for p in line.strip("│").split("│")])[0] in STUDENTS
    }
    assert cells["honest"] == ["2", "2", "2", "6", ""]
    assert cells["no_tests"] == ["2", "0", "2", "4", "needs manual grading"]
    assert cells["corrupt"] == ["-", "-", "-", "0", "ungradable"]
    assert set(cells) == set(STUDENTS)
    assert "2: test-matmul (2 points)" in done.output
    assert "corrupt: ungradable:" in said(done) and "not a valid notebook" in said(done)


def test_course_is_found_like_nbgrader_finds_it(klass: Class, tmp_path, monkeypatch):
    monkeypatch.chdir(klass.path)  # inside the course folder: no --course needed
    assert "honest" in tito("grade", "report", 1).output
    assert "honest" in tito("grade", "report", 1, "--course", ".").output
    elsewhere = tmp_path / "not-a-course"
    elsewhere.mkdir()
    done = tito("grade", "report", 1, "--course", elsewhere)  # an explicit --course wins
    assert done.exit_code == 1 and f"{elsewhere} is not a tito course folder" in said(done)
    monkeypatch.chdir(klass.path.parent)  # relative to the current folder
    assert "honest" in tito("grade", "report", 1, "--course", klass.path.name).output
    monkeypatch.setenv("TITO_ROOT", str(tmp_path))  # not in a course: <project>/course
    monkeypatch.chdir(elsewhere)
    done = tito("grade", "report", 1)
    assert f"{tmp_path / 'course'} is not a tito course folder" in said(done)


def test_select_students_by_glob_and_shard():
    names = [f"s{i:03d}" for i in range(200)]
    assert grading.select_students(names, ["s00*", "s199"]) == [*names[:10], "s199"]
    shares = [grading.select_students(names, None, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(sum(shares, [])) == names and all(40 < len(s) < 90 for s in shares)
    assert grading.select_students(names, ["s00*"], "1/1") == names[:10]
    for bad in ("0/2", "3/2", "1-2", "x"):
        with pytest.raises(TitoError, match="--shard takes i/n"):
            grading.select_students(names, None, bad)
    with pytest.raises(TitoError, match="no submission from 'zz\\*'"):
        grading.select_students(names, ["zz*"])


def test_a_failed_release_leaves_nothing_and_names_its_cause(tmp_path: Path):
    """Also: a gradebook at a non-default sqlite URL, and module 06 releases."""
    folder = init(tmp_path / "course")
    book = tmp_path / "elsewhere" / "book.sqlite"
    book.parent.mkdir()
    with open(folder / course.CONFIG_NAME, "a") as config:
        config.write(f'c.CourseDirectory.db_url = "sqlite:///{book}"\n')
    header = tmp_path / "header.ipynb"  # and nbgrader's own options on tito's command line
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("Hi")]), header)
    done = tito(
        "grade", "generate", 6, "--course", folder, f"--IncludeHeaderFooter.header={header}"
    )
    assert done.exit_code == 0, done.output
    release = nbformat.read(folder / "release" / "06_optimizers" / "optimizers.ipynb", 4)
    assert release.cells[0].source == "Hi"
    done = tito("grade", "generate", 6, "--course", folder, "--bogus")
    assert done.exit_code == 1 and "no such option: --bogus" in said(done)
    source = folder / "source" / "02_activations" / "activations.ipynb"
    nb = nbformat.read(source, 4)
    nb.cells.append(new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION"))
    given = {"grade": False, "solution": False, "task": False, "schema_version": 3}
    nb.cells[-1].metadata["nbgrader"] = {**given, "grade_id": "given", "locked": True}
    nbformat.write(nb, source)
    done = tito("grade", "generate", 2, "--course", folder)
    assert done.exit_code == 1
    assert "Solution region detected in a non-solution cell" in said(done)
    assert "above traceback" not in said(done)
    assert not (folder / "release" / "02_activations").exists()
    assert not (folder / "gradebook.db").exists()
    with Gradebook(f"sqlite:///{book}", course.COURSE_ID) as gb:
        assert [a.name for a in gb.assignments] == ["06_optimizers"]


def test_init_keeps_the_instructors_config(tmp_path: Path, monkeypatch):
    folder = tmp_path / "course"
    folder.mkdir()
    monkeypatch.chdir(folder)
    init(Path("."), "--timeout", 5)  # `init .` in the current folder
    assert course.execute_settings(folder) == (5, course.KERNEL_NAME)
    with open(folder / course.CONFIG_NAME, "a") as config:
        config.write('c.ExecutePreprocessor.timeout = 77\nc.Execute.kernel_name = "mine"\n')
    before = (folder / course.CONFIG_NAME).read_text()
    done = tito("grade", "init", "--timeout", 9)  # no argument: the course we stand in
    assert done.exit_code == 0 and "kept your nbgrader_config.py" in said(done)
    assert (folder / course.CONFIG_NAME).read_text() == before
    assert "c.ExecutePreprocessor.timeout = 9" in (folder / course.TITO_CONFIG).read_text()
    assert course.execute_settings(folder) == (77, "mine")
    with course.nbgrader_options(["--ExecutePreprocessor.timeout=4"]):  # tito's command line
        assert course.execute_settings(folder) == (4, "mine")
    # nbgrader's own command line wins over both files
    from nbgrader.apps import AutogradeApp
    from nbgrader.preprocessors import Execute

    nbgrader = AutogradeApp()
    nbgrader.initialize(["--ExecutePreprocessor.timeout=3", "--Execute.kernel_name=cli"])
    execute = Execute(config=nbgrader.config)
    assert (execute.timeout, execute.kernel_name) == (3, "cli")
    # an nbgrader_config.py that does not load tito's settings is left alone, with the fix
    (folder / course.CONFIG_NAME).write_text("c = get_config()\n")
    done = tito("grade", "init")
    assert done.exit_code == 1 and "does not load tito_config.py" in said(done)
    assert (folder / course.CONFIG_NAME).read_text() == "c = get_config()\n"
