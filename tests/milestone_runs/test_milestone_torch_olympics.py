"""`tito milestone run olympics --quick` (2018) on a small trained GPT: every entry measured and
scored by module 20's rules against the plain model, with a table, a plot and a summary."""

import json

import pytest
from typer.testing import CliRunner

from milestones import torch_olympics
from tito.cli.main import app

runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n"


def tito(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    trained = tito("milestone", "run", "gpt", "--config", "nano", "--steps", 60, "--quick",
                   "--out", runs / "gpt-quick")  # fmt: skip
    assert trained.exit_code == 0, trained.output
    done = tito("milestone", "run", "olympics", "--quick", "--out", runs / "olympics-quick")
    assert done.exit_code == 0, done.output
    out = runs / "olympics-quick"
    return out, json.loads((out / "summary.json").read_text()), done.output


def test_every_entry_is_measured_and_scored_against_plain(finished):
    out, summary, output = finished
    assert summary["source"].endswith("gpt-quick")  # the trained run, not a new teacher
    assert list(summary["entries"]) == list(torch_olympics.ENTRIES)
    entries, scores = summary["entries"], summary["scores"]
    events = ("speed", "size", "all-around")
    assert scores["plain"] == {**dict.fromkeys(events, 1.0), "broken": dict.fromkeys(events)}
    plain = entries["plain"]
    assert entries["accelerated"]["bytes"] == plain["bytes"]
    assert entries["accelerated"]["bits_per_char"] == pytest.approx(plain["bits_per_char"], 1e-5)
    for smaller in ("int8 per channel", "half the heads and neurons", "half rank"):
        assert entries[smaller]["bytes"] < plain["bytes"], smaller
        if scores[smaller]["broken"]["size"] is None:
            assert scores[smaller]["size"] == pytest.approx(
                plain["bytes"] / entries[smaller]["bytes"]
            )
        else:
            assert scores[smaller]["size"] == 0.0


def test_the_quality_event_trains_within_its_budget(finished):
    _, summary, _ = finished
    spent = summary["quality_budget_cpu_seconds"]
    assert set(summary["quality"]) == {"plain", "accelerated"}
    for row in summary["quality"].values():
        assert 0 < row["train_cpu_seconds"] <= spent
    assert summary["scores"]["quality"]["plain"] == 1.0


def test_table_plot_and_files(finished):
    out, summary, output = finished
    table = (out / "table.md").read_text()
    for name in torch_olympics.ENTRIES:
        assert f"| {name} |" in table
    assert (out / "olympics.png").read_bytes().startswith(PNG)
    assert summary["files"] == ["olympics.png", "table.md", "summary.json"]
    assert "| int8 per channel |" in output


def test_options_it_has_no_use_for_are_refused(tmp_path):
    done = tito("milestone", "run", "olympics", "--data", tmp_path / "x.txt", "--out", tmp_path)
    assert done.exit_code == 1 and "uses the trained run's corpus" in done.output
