"""The class's Torch Olympics: three students whose models differ, measured one at a time against
the instructor's baseline into the gradebook; lies, links and foreign runs measured as they are
or refused with a reason, and nothing in the course folder changed."""

import csv
import hashlib
import json
import shutil

import pytest
from typer.testing import CliRunner

from tito.cli.main import app
from tito.grading import class_olympics

runner = CliRunner()


def tito(*args):
    return runner.invoke(app, [str(a) for a in args])


def train(out, steps, seed, *extra):
    done = tito("milestone", "run", "gpt", "--config", "nano", "--steps", steps, "--seed", seed,
                "--out", out, *extra)  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


def digest(folder):
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    runs = root / "runs"
    longer, shorter = train(runs / "a", 40, 0), train(runs / "b", 8, 1)
    prose = root / "prose.txt"
    prose.write_text("the cat sat on the mat. " * 200)
    foreign = train(runs / "c", 8, 0, "--data", prose)
    folder = root / "course"
    assert tito("grade", "init", folder).exit_code == 0
    assert tito("grade", "generate", 20, "--course", folder).exit_code == 0

    def submit(student, run, manifest):
        target = folder / "submitted" / student / "20_capstone" / "run"
        target.mkdir(parents=True)
        shutil.copy2(run / "checkpoint.npz", target / "checkpoint.npz")
        (target / "olympics.json").write_text(json.dumps(manifest))

    submit("ada", longer, {"name": "ada", "transforms": ["accelerate"]})
    submit("bob", shorter, {"name": "bob", "transforms": []})
    submit("=1+1", longer, {"transforms": [], "tokens_per_second": 1e12, "score": 99})
    submit("dave", foreign, {"transforms": []})
    linked = folder / "submitted" / "eve" / "20_capstone"
    linked.mkdir(parents=True)
    (linked / "run").symlink_to(folder / "submitted" / "ada" / "20_capstone" / "run")
    before = digest(folder / "submitted")
    done = tito("olympics", "grade", "size", "--course", folder, "--baseline", longer,
                "--repeats", 1)  # fmt: skip
    assert done.exit_code == 0, done.output
    return folder, done.output, before


def test_every_student_is_measured_against_one_baseline(course):
    folder, output, _ = course
    rows = {r["student"]: r for r in class_olympics.board(folder)["size"]}
    assert set(rows) == {"ada", "bob", "=1+1", "dave", "eve"}
    assert "3 of 5 submission(s) measured in size" in output
    ada, bob, liar = rows["ada"], rows["bob"], rows["=1+1"]
    assert ada["bytes"] == bob["bytes"] == liar["bytes"]  # same architecture, nothing pruned
    assert ada["bits_per_char"] != bob["bits_per_char"]  # different models, measured as such
    assert liar["bits_per_char"] == pytest.approx(ada["bits_per_char"], rel=1e-5)
    assert liar["score"] == pytest.approx(1.0)  # the baseline itself: the claims count for nothing
    assert bob["bits_per_char"] > ada["bits_per_char"]  # 8 steps against 40
    assert bob["score"] == 0.0 and "above the bound" in bob["violation"]


def test_a_foreign_or_linked_run_is_refused_with_a_reason(course):
    folder, output, _ = course
    rows = {r["student"]: r for r in class_olympics.board(folder)["size"]}
    assert rows["dave"]["score"] == 0.0 and "default corpus" in rows["dave"]["violation"]
    assert rows["eve"]["score"] == 0.0 and "symbolic link" in rows["eve"]["violation"]
    assert "eve: not measured" in output and "Traceback" not in output


def test_nothing_in_the_submissions_changed(course):
    folder, _, before = course
    assert digest(folder / "submitted") == before


def test_the_board_is_shown_and_exported_as_inert_csv(course, tmp_path):
    folder, _, _ = course
    shown = tito("olympics", "board", "--course", folder, "--csv", tmp_path / "board.csv")
    assert shown.exit_code == 0, shown.output
    assert "class: size" in shown.output and "ada" in shown.output
    with open(tmp_path / "board.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["student"] for r in rows} == {"ada", "bob", "'=1+1", "dave", "eve"}


def test_measuring_again_replaces_a_students_row(course):
    folder, _, _ = course
    first = {r["student"]: r for r in class_olympics.board(folder)["size"]}
    class_olympics.store(folder, "size", [class_olympics.Result("bob", reason="withdrawn")])
    again = {r["student"]: r for r in class_olympics.board(folder)["size"]}
    assert again["bob"]["violation"] == "withdrawn" and again["ada"] == first["ada"]
    assert len(again) == len(first)


def test_an_oversized_model_is_refused_before_it_is_built(tmp_path):
    from milestones.corpus import DEFAULT_SOURCE
    from milestones.errors import MilestoneError
    from milestones.runs import UNTRUSTED_LIMITS, check_untrusted

    path = tmp_path / "checkpoint.npz"
    path.write_bytes(b"x")
    meta = {
        "corpus_source": DEFAULT_SOURCE,
        "config": {"embed_dim": UNTRUSTED_LIMITS["embed_dim"] * 8},
    }
    with pytest.raises(MilestoneError, match="embed_dim 8192 is outside"):
        check_untrusted(path, meta)


def test_a_malformed_run_is_refused_and_the_class_goes_on(tmp_path, monkeypatch):
    from milestones import olympics

    folder = tmp_path / "course"
    for student in ("broken", "fine"):
        run = folder / "submitted" / student / "20_capstone" / "run"
        run.mkdir(parents=True)
        (run / "checkpoint.npz").write_bytes(b"PK not a zip")
    measured = []

    def fake(event, run, *args, **kwargs):
        if "broken" in str(run):
            raise KeyError("config")  # what a checkpoint with odd metadata could raise
        measured.append(run)
        return {"score": 1.0, "measured": {}, "violation": None, "checkpoint_sha256": "x",
                "when": "now", "baseline": {}}  # fmt: skip

    from tinytorch.olympics.events import Measured

    monkeypatch.setattr(olympics, "measure", lambda *a, **k: Measured(1.0, 1, 1.0))
    monkeypatch.setattr(olympics, "run_event", fake)
    monkeypatch.setattr(class_olympics, "store", lambda *a: None)
    results = {r.student: r for r in class_olympics.measure_class(folder, "size", tmp_path)}
    assert "unreadable run (KeyError" in results["broken"].reason
    assert results["fine"].record is not None and len(measured) == 1
