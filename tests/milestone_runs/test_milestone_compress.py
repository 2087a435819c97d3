"""End to end: `tito milestone run compress` on a nano GPT run trained on a small text file."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from milestones import compress, training
from tinytorch.compress.quantization import QuantizedLinear, named_modules
from tito.cli.main import app

PROSE = (
    "The cat sat on the mat, the dog ran to the park, and the bird sang in the tree by the "
    "river. A small model reads this text one character at a time.\n"
) * 12
PNG = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    text = runs / "prose.txt"
    text.write_text(PROSE, encoding="utf-8")
    gpt = ["milestone", "run", "gpt", "--config", "nano", "--steps", 40]
    result = runner.invoke(app, [*map(str, gpt), "--data", str(text), "--out", str(runs / "gpt")])
    assert result.exit_code == 0, result.output
    args = ["milestone", "run", "compress", "--steps", "6", "--out", str(runs / "compress")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((runs / "compress" / "summary.json").read_text())
    return runs, summary, result.output


def test_every_variant_is_scored_and_written(finished):
    runs, summary, output = finished
    names = [r["name"] for r in summary["rows"]]
    assert names[:4] == ["original (float32)", "int8 per-channel", "int8 per-tensor",
                         "int4 per-channel"]  # fmt: skip
    assert any(n.startswith("pruned 50%") for n in names)
    assert any(n.startswith("pruned 80%") for n in names)
    assert any(n.startswith("low rank") for n in names)
    assert names[-2:] == ["distilled half-size (6 steps)", "half-size, no teacher (6 steps)"]
    assert summary["source"] == str(runs / "gpt")
    for row in summary["rows"]:
        assert np.isfinite(row["bits_per_char"]) and row["bits_per_char"] > 0
        assert row["scored_tokens_per_second"] > 0 and row["sample"].startswith("The")
    table = (runs / "compress" / "table.md").read_text()
    assert table.startswith("| variant |") and "Goal, int8 per-channel" in table
    assert table.count("\n| ") == len(names)  # one line per variant
    assert (runs / "compress" / "pareto.png").read_bytes().startswith(PNG)
    assert "wrote pareto.png, table.md, summary.json" in " ".join(output.split())


def test_bytes_and_parameters_are_measured(finished):
    _, summary, _ = finished
    rows = {r["name"]: r for r in summary["rows"]}
    original = rows["original (float32)"]
    assert original["bytes"] == 4 * original["parameters"]
    linear, layers = summary["linear_weights"], summary["linear_layers"]
    channels = summary["linear_channels"]
    table, table_rows = summary["embedding_weights"], summary["embedding_rows"]
    int8, int4 = rows["int8 per-channel"], rows["int4 per-channel"]
    assert int8["parameters"] == original["parameters"]
    # every Linear and embedding weight: 4 bytes -> 1; a float32 scale and an int8 zero point
    # per output channel (per row of a table), or per layer
    quantized = linear + table
    assert original["bytes"] - int8["bytes"] == 3 * quantized - 5 * (channels + table_rows)
    assert original["bytes"] - rows["int8 per-tensor"]["bytes"] == 3 * quantized - 5 * (layers + 2)
    assert int8["bytes"] - int4["bytes"] == quantized // 2  # two codes to a byte
    half, most = rows["pruned 50% (global magnitude)"], rows["pruned 80% (global magnitude)"]
    others = original["parameters"] - linear
    assert half["parameters"] == pytest.approx(others + linear / 2, abs=2)
    assert most["parameters"] == pytest.approx(others + linear / 5, abs=2)
    assert most["bytes"] < half["bytes"] < original["bytes"]
    for name in ("heads and MLP neurons halved", "distilled half-size (6 steps)"):
        assert rows[name]["bytes"] == 4 * rows[name]["parameters"] < original["bytes"]


def test_the_int8_goal_is_judged_from_the_table(finished):
    _, summary, _ = finished
    rows, goal = summary["rows"], summary["goal_int8_per_channel"]
    change = rows[1]["bits_per_char"] / rows[0]["bits_per_char"] - 1
    assert goal["change"] == pytest.approx(change) and goal["met"] == (change <= 0.02)
    assert set(summary["pareto_front"]) <= {r["name"] for r in rows}


def test_the_reloaded_run_is_the_trained_model(finished):
    runs, summary, _ = finished
    run = compress.load_run(runs / "gpt", None)
    trained = json.loads((runs / "gpt" / "summary.json").read_text())
    config = run.meta["config"]
    loss = training.evaluate(run.model, run.val, config["eval_windows"], config["batch_size"])
    np.testing.assert_allclose(loss, trained["training"]["final_val_loss"], rtol=1e-5)
    quantized = compress.quantize_model(run.model)
    assert any(isinstance(m, QuantizedLinear) for _, m in named_modules(quantized))


def test_options_that_do_not_apply_are_refused(tmp_path):
    result = runner.invoke(
        app, ["milestone", "run", "compress", "--tokenizer", "bpe", "--out", str(tmp_path)]
    )
    assert result.exit_code != 0 and "--tokenizer does not apply to compress" in result.output


def test_the_fewest_steps_have_a_schedule():
    """--steps 2 fine-tuned a pruned model for one step and failed on a one-step warmup."""
    assert [compress.warmup_steps(n) for n in (1, 2, 10, 100)] == [0, 1, 1, 10]
