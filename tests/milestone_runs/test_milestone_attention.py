"""`tito milestone run attention`: the reversal task, its data and its accuracy report."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from milestones import attention
from tito.cli.main import app


def said(result):
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def test_sequences_are_digits_separator_and_the_reversal():
    x, y = attention.sequences(np.random.default_rng(0), 5)
    n = attention.LENGTH
    assert x.shape == y.shape == (5, 2 * n)
    assert (x[:, n] == attention.SEP).all()
    assert np.array_equal(y[:, n:], x[:, :n][:, ::-1])
    assert (y[:, :n] == attention.IGNORE).all()


def test_short_run_reports_accuracy(tmp_path):
    out = tmp_path / "attention"
    result = CliRunner().invoke(
        app, ["milestone", "run", "attention", "--steps", "20", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert 0.0 <= summary["sequence_accuracy"] <= summary["digit_accuracy"] <= 1.0
    assert (out / "attention.png").read_bytes()[:4] == b"\x89PNG"
    assert "digit accuracy" in said(result)
    assert "code: reference modules 01 02" in said(result)  # whose code ran


@pytest.mark.parametrize("option", [["--data", "x.txt"], ["--resume"], ["--tokenizer", "bpe"],
                                    ["--config", "small"]])  # fmt: skip
def test_options_it_has_no_use_for_are_refused_in_one_line(tmp_path, option):
    result = CliRunner().invoke(
        app, ["milestone", "run", "attention", "--out", str(tmp_path), *option]
    )
    assert result.exit_code == 1
    assert said(result).startswith(f"error: {option[0]} does not apply to attention: it ")
    assert not (tmp_path / "summary.json").exists()


def test_a_nan_loss_stops_the_run_in_one_line(tmp_path, monkeypatch):
    """Module 07's Trainer refuses a nan loss; the milestone says so, with no traceback."""
    monkeypatch.setattr(attention, "reversal_loss", lambda logits, y: logits.sum() * float("nan"))
    out = tmp_path / "attention"
    result = CliRunner().invoke(
        app, ["milestone", "run", "attention", "--steps", "3", "--out", str(out)]
    )
    assert result.exit_code == 1
    assert "error: attention stopped: the loss is nan; the weights were not" in said(result)
    assert "Traceback" not in result.output
