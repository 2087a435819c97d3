"""The class's Olympics measure quality on the instructor's own held-out text when given one
(`tito olympics grade EVENT --heldout FILE`): text no student has, so no entry can have trained
on it, unlike Python's documentation, which every student has."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from milestones import olympics as contest
from milestones.runs import load_run
from tito.cli.main import app
from tito.grading import class_olympics


def tito(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


LECTURE = " ".join(
    f"In lecture {i} we derive the gradient of a loss with respect to weight number {i * 7}, "
    f"then check it against a finite difference with step {i}e-3 before trusting it."
    for i in range(60)
)


LONG = "x" * 129  # longer than the board's student column (PostgreSQL refuses it)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    root = tmp_path_factory.mktemp("heldout")
    run = root / "runs" / "a"
    done = tito("milestone", "run", "gpt", "--config", "nano", "--steps", 8, "--seed", 0,
                "--out", run)  # fmt: skip
    assert done.exit_code == 0, done.output
    folder = root / "course"
    assert tito("grade", "init", folder).exit_code == 0
    assert tito("grade", "generate", 20, "--course", folder).exit_code == 0
    for student in ("ada", "*", LONG):
        target = folder / "submitted" / student / "20_capstone" / "run"
        target.mkdir(parents=True)
        shutil.copy2(run / "checkpoint.npz", target / "checkpoint.npz")
        (target / "olympics.json").write_text(json.dumps({"name": "ada", "transforms": []}))
    notes = root / "notes.txt"
    notes.write_text(LECTURE)
    return root, folder, run, notes


def test_quality_is_measured_on_the_instructors_own_text(klass):
    root, folder, run, notes = klass
    done = tito("olympics", "grade", "size", "--course", folder, "--baseline", run,
                "--repeats", 1, "--heldout", notes)  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = {r["student"]: r for r in class_olympics.board(folder)["size"]}
    assert set(rows) == {"ada", "*"}  # a name is a name: `*` is one student
    said = " ".join(done.output.split())
    assert "not measured: the student folder 'xxxx" in said and "longer than the 128" in said
    row = rows["ada"]
    loaded = load_run(run)
    on_notes = contest.heldout_bits(loaded, loaded.model, contest.read_heldout(notes))
    default = contest.heldout_bits(loaded, loaded.model, contest.heldout_text(loaded.corpus.text))
    assert rows["*"]["bits_per_char"] == row["bits_per_char"]
    assert row["violation"] is None and row["score"] > 0  # the memorisation test: not flagged
    assert row["bits_per_char"] == pytest.approx(on_notes, rel=1e-6)
    assert abs(on_notes - default) > 1e-3  # another text, another number


def test_a_held_out_file_too_short_to_measure_is_one_line(klass):
    root, folder, run, _ = klass
    short = root / "short.txt"
    short.write_text("too short")
    done = tito("olympics", "grade", "size", "--course", folder, "--baseline", run,
                "--heldout", short)  # fmt: skip
    assert done.exit_code == 1
    assert "--heldout: " in done.output and "needs at least 5,000" in done.output
