"""A finished GPT run is never lost (issue 38): the run-loss sequence, with the nano preset.

A finished run; a second run stopped early; its --resume stopped again; a new run without
--resume, stopped too. The finished run's summary, plots and weights must still be in its folder,
byte for byte, where compress, the olympics and `tito model export` look; every stopped run is
kept in <out>/next or <out>/earlier/<time>/; --resume says where it continues.
"""

import json
import os
import signal
import time

import pytest
from typer.testing import CliRunner

from milestones import training
from milestones.output import keep_earlier
from milestones.runs import require_finished
from tito.cli.main import app
from tito.curriculum.paths import PACKAGE_ROOT

PROSE = (
    "The cat sat on the mat, the dog ran to the park, and the bird sang in the tree by the "
    "river. A small model reads this text one character at a time.\n"
) * 12
runner = CliRunner()


def said(result):
    return " ".join(result.output.split())


def invoke(*args):
    return runner.invoke(app, [*map(str, args)])


def gpt(*args):
    return invoke("milestone", "run", "gpt", "--config", "nano", *args)


def stop_at(monkeypatch, step):
    """Press Ctrl-C once the run has finished `step` steps (the trainer saves and stops)."""

    def hook(done):
        if done == step:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(training, "after_step", hook)


def files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "prose.txt"
    path.write_text(PROSE, encoding="utf-8")
    return path


def test_the_run_loss_sequence_keeps_the_finished_run_where_it_is_read(
    tmp_path, text_file, monkeypatch
):
    out = tmp_path / "runs" / "gpt"
    first = gpt("--steps", 12, "--data", text_file, "--out", out)
    assert first.exit_code == 0, first.output
    finished = files(out)
    assert {"summary.json", "checkpoint.npz", "loss.png", "attention.png"} <= finished.keys()

    stop_at(monkeypatch, 3)  # a second run, stopped early: it trained beside the finished one
    second = gpt("--steps", 12, "--data", text_file, "--out", out, "--seed", 1)
    assert second.exit_code == 130, second.output
    assert f"checkpoint saved to {out / 'next' / 'checkpoint.npz'}" in said(second)
    assert files(out) == finished

    stop_at(monkeypatch, 5)  # its --resume finds it in next/, says so, and is stopped again
    resumed = invoke("milestone", "run", "gpt", "--out", out, "--resume")
    assert resumed.exit_code == 130, resumed.output
    assert f"continuing the run in {out / 'next'}" in said(resumed)
    assert "at step 3 of 12" in said(resumed) and "interrupted at step 5" in said(resumed)
    assert files(out) == finished

    stop_at(monkeypatch, 2)  # a new run without --resume: the step-5 run is kept, not deleted
    third = gpt("--steps", 12, "--data", text_file, "--out", out, "--seed", 2)
    assert third.exit_code == 130, third.output
    (kept,) = (out / "earlier").iterdir()
    assert f"the unfinished run in {out / 'next'} was moved to {kept}" in said(third)
    assert files(out) == finished
    with pytest.raises(Exception, match="step 5 of 12"):
        require_finished(kept)

    # where compress, the olympics and `tito model export` look: the finished run, accepted
    require_finished(out)
    exported = invoke("model", "export", out, tmp_path / "hf")
    assert exported.exit_code == 0, exported.output
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["n_layer"] >= 1

    # the stopped run, resumed to its end, takes the finished run's place; that one is kept whole
    monkeypatch.setattr(training, "after_step", None)
    done = invoke("milestone", "run", "gpt", "--out", out, "--resume")
    assert done.exit_code == 0, done.output
    assert json.loads((out / "summary.json").read_text())["seed"] == 2
    assert not (out / "next").exists()
    kept_runs = [files(p) for p in (out / "earlier").iterdir()]
    assert finished in kept_runs and len(kept_runs) == 2


def test_resume_without_a_run_names_the_earlier_runs(tmp_path, text_file, monkeypatch):
    out = tmp_path / "gpt"
    stop_at(monkeypatch, 2)
    assert gpt("--steps", 6, "--data", text_file, "--out", out).exit_code == 130
    assert gpt("--steps", 6, "--data", text_file, "--out", out).exit_code == 130
    (kept,) = (out / "earlier").iterdir()
    (out / "checkpoint.npz").unlink()
    result = invoke("milestone", "run", "gpt", "--out", out, "--resume")
    assert result.exit_code != 0
    assert f"continue it with --out {kept} --resume" in said(result)


def test_unfinished_runs_are_refused_naming_the_step_unless_allowed(
    tmp_path, text_file, monkeypatch
):
    out = tmp_path / "runs" / "gpt"
    stop_at(monkeypatch, 3)
    assert gpt("--steps", 12, "--data", text_file, "--out", out).exit_code == 130
    monkeypatch.setattr(training, "after_step", None)
    compress = ["milestone", "run", "compress", "--steps", 2, "--out", tmp_path / "runs" / "c"]
    refused = invoke(*compress)
    assert refused.exit_code == 1
    assert f"the run in {out} is unfinished: its checkpoint is step 3 of 12" in said(refused)
    assert "--allow-partial" in said(refused)
    assert invoke("model", "export", out, tmp_path / "hf").exit_code == 1
    olympics = invoke("olympics", "run", "speed", "--run", out)
    assert olympics.exit_code == 1 and "step 3 of 12" in said(olympics)
    allowed = invoke("model", "export", out, tmp_path / "hf", "--allow-partial")
    assert allowed.exit_code == 0, allowed.output
    compressed = invoke(*compress, "--allow-partial")
    assert compressed.exit_code == 0, compressed.output
    summary = json.loads((tmp_path / "runs" / "c" / "summary.json").read_text())
    assert summary["source"] == str(out)


def test_a_failed_quick_run_leaves_no_empty_folder(tmp_path, monkeypatch):
    (tmp_path / "tinytorch").symlink_to(PACKAGE_ROOT / "tinytorch")  # every module complete
    monkeypatch.setenv("TITO_ROOT", str(tmp_path))
    result = invoke("milestone", "run", "gpt", "--quick", "--data", tmp_path / "missing.txt")
    assert result.exit_code == 1 and "no such file" in said(result)
    assert not (tmp_path / "runs").exists()


def test_resume_names_a_run_kept_in_previous_by_an_older_tito(tmp_path, text_file, monkeypatch):
    """Before earlier/, a new run moved the one before it into <out>/previous/."""
    out = tmp_path / "gpt"
    stop_at(monkeypatch, 2)
    assert gpt("--steps", 6, "--data", text_file, "--out", out).exit_code == 130
    (out / "previous").mkdir()
    (out / "checkpoint.npz").replace(out / "previous" / "checkpoint.npz")
    result = invoke("milestone", "run", "gpt", "--out", out, "--resume")
    assert result.exit_code != 0
    assert f"continue it with --out {out / 'previous'} --resume" in said(result)


def test_every_earlier_run_is_kept_named_by_the_time_it_last_wrote(tmp_path):
    """compress and the olympics milestone keep their earlier tables the same way."""
    out = tmp_path / "compress"
    out.mkdir()
    kept = []
    for text in ("first", "second"):
        (out / "table.md").write_text(text)
        os.utime(out / "table.md", (1_700_000_000, 1_700_000_000))  # the same second, twice
        kept.append(keep_earlier(out, ["table.md", "summary.json"]))
    assert [(p / "table.md").read_text() for p in kept] == ["first", "second"]
    assert kept[0].parent == kept[1].parent == out / "earlier" and kept[1].name.endswith("-2")
    assert kept[0].name == time.strftime("%Y-%m-%d-%H%M%S", time.localtime(1_700_000_000))
    assert keep_earlier(out, ["table.md"]) is None  # nothing left to keep
