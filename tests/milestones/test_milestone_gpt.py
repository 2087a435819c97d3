"""End to end: `tito milestone run gpt` with a tiny config on a small text file."""

import json
import os
import signal

import numpy as np
import pytest
from typer.testing import CliRunner

from milestones import training
from milestones.scaling import exact_formula
from tinytorch.models.transformer import GPT, count_parameters
from tito.main import app

PROSE = (
    "A small model reads this text one character at a time and learns which letter tends to "
    "follow which. The words repeat, so the model can find them again: the cat sat on the mat, "
    "the dog ran to the park, and the bird sang in the tree by the river.\n"
) * 12
PNG = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


def said(result):
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def gpt(*args):
    return runner.invoke(app, ["milestone", "run", "gpt", "--config", "tiny", *map(str, args)])


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "prose.txt"
    path.write_text(PROSE, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory, text_file):
    out = tmp_path_factory.mktemp("run") / "gpt"
    result = gpt("--steps", 30, "--data", text_file, "--out", out)
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "summary.json").read_text()), result.output


def test_writes_summary_checkpoint_and_png_plots(finished):
    out, summary, _ = finished
    for name in ("loss.png", "attention.png", "scaling.png"):
        assert (out / name).read_bytes()[:8] == PNG
    with np.load(out / training.CHECKPOINT, allow_pickle=False) as archive:
        assert len(archive.files) > 10
    assert set(summary["files"]) == {p.name for p in out.iterdir()}


def test_loss_decreases(finished):
    training_ = finished[1]["training"]
    assert training_["steps"] == 30
    assert training_["final_val_loss"] < training_["initial_val_loss"]
    assert [s for s, _ in training_["val_history"]] == [0, 10, 20, 30]


def test_parameter_counts_agree_with_the_model(finished):
    summary = finished[1]
    cfg = summary["config"]
    model = GPT(
        summary["corpus"]["vocab_size"],
        cfg["embed_dim"],
        cfg["num_layers"],
        cfg["num_heads"],
        cfg["context"],
        tie_weights=True,  # the milestone's model ties its output layer, as GPT-2
    )
    params = summary["parameters"]
    assert params["total"] == count_parameters(model) == sum(params["by_component"].values())
    this = summary["parameter_scaling"][0]
    assert this["built_count"] == this["exact_formula"] == exact_formula(model.config)
    assert this["course_formula"] == 12 * cfg["num_layers"] * cfg["embed_dim"] ** 2 + (
        summary["corpus"]["vocab_size"] * cfg["embed_dim"]
    )


def test_reports_are_consistent(finished):
    summary = finished[1]
    for row in summary["attention_memory"]:
        assert row["measured_bytes"] == row["predicted_bytes"]
    kv = summary["kv_cache_bytes_per_token"]
    assert kv["measured_this_model"] == kv["predicted"]["this model"]
    mem = summary["training_memory"]
    for part in ("weights", "gradients", "adam_state"):
        assert mem["measured"][part] == mem["predicted"][part]
    speed = summary["generation_speed"]
    assert speed["with_cache"] > 0 and speed["without_cache"] > 0


def test_samples_at_each_temperature_and_greedy(finished):
    summary, output = finished[1], finished[2]
    temps = [s["temperature"] for s in summary["samples"]]
    assert temps == [0.5, 0.8, 1.2, 0.0] and summary["samples"][-1]["greedy"]
    new = summary["config"]["sample_tokens"]
    for s in summary["samples"]:
        assert s["text"].startswith(summary["prompt"])
        assert len(s["text"]) == len(summary["prompt"]) + new
    assert "greedy" in " ".join(output.split()) and "parameter scaling" in output


def _interrupt_at(step):
    def hook(done):
        if done == step:
            os.kill(os.getpid(), signal.SIGINT)

    return hook


def test_ctrl_c_then_resume_matches_an_uninterrupted_run(tmp_path, text_file, monkeypatch):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert gpt("--steps", 20, "--data", text_file, "--out", whole).exit_code == 0

    monkeypatch.setattr(training, "after_step", _interrupt_at(7))
    stopped = gpt("--steps", 20, "--data", text_file, "--out", parts)
    assert stopped.exit_code == 130
    assert "interrupted at step 7" in said(stopped) and "--resume" in said(stopped)
    with np.load(parts / training.CHECKPOINT) as archive:
        assert int(np.asarray(archive[[k for k in archive.files if "step" in k][0]])) == 7

    monkeypatch.setattr(training, "after_step", None)
    resumed = runner.invoke(app, ["milestone", "run", "gpt", "--out", str(parts), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "resumed from" in said(resumed)
    with np.load(whole / training.CHECKPOINT) as a, np.load(parts / training.CHECKPOINT) as b:
        assert a.files == b.files
        for key in a.files:
            assert np.array_equal(a[key], b[key]), key
    first = json.loads((whole / "summary.json").read_text())["training"]
    second = json.loads((parts / "summary.json").read_text())["training"]
    assert first["final_val_loss"] == second["final_val_loss"]
    assert first["val_history"] == second["val_history"]


def test_a_fresh_run_keeps_the_earlier_checkpoint(tmp_path, text_file):
    out = tmp_path / "again"
    assert gpt("--steps", 10, "--data", text_file, "--out", out).exit_code == 0
    before = (out / training.CHECKPOINT).read_bytes()
    assert gpt("--steps", 10, "--data", text_file, "--out", out, "--seed", 3).exit_code == 0
    assert (out / "checkpoint.previous.npz").read_bytes() == before
