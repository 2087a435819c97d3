"""The scaling reports: formulas against models we build, memory predicted against measured."""

import json

import pytest
from typer.testing import CliRunner

from milestones import scaling
from tinytorch.models.scaling import count_parameters, estimate_parameters
from tinytorch.models.transformer import GPT, PRESETS, GPTConfig
from tito.cli.main import app

SMALL = [
    GPTConfig(65, 32, 1, 2, max_seq_len=16),
    GPTConfig(96, 64, 3, 4, max_seq_len=32),
    GPTConfig(50, 48, 2, 3, max_seq_len=8, tie_weights=True),
    GPTConfig(100, 128, 4, 4, max_seq_len=64),
    GPTConfig(30, 32, 2, 4, max_seq_len=16, position="sinusoidal"),
]


@pytest.mark.parametrize(
    "config", SMALL, ids=lambda c: f"L{c.num_layers}d{c.embed_dim}{c.position[0]}"
)
def test_exact_formula_counts_every_parameter(config):
    model = GPT.from_config(config)
    assert scaling.exact_formula(config) == count_parameters(model)
    assert scaling.exact_formula(config) == estimate_parameters(config)["exact"]


def said(result):
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def test_course_formula_is_the_matrices_and_token_embedding():
    c = GPTConfig(100, 128, 4, 4, max_seq_len=64)
    assert scaling.course_formula(c) == 12 * 4 * 128**2 + 100 * 128
    # what it leaves out: position embedding, biases, layer norms and the untied output head
    left_out = 64 * 128 + 4 * (13 * 128) + 2 * 128 + (128 * 100 + 100)
    assert scaling.exact_formula(c) - scaling.course_formula(c) == left_out


def test_course_formula_is_close_at_gpt3_scale_and_far_off_for_tiny_models():
    rows = scaling.parameter_scaling(SMALL[0], build_limit=10**6)
    by_name = {r["name"]: r for r in rows}
    assert by_name["this model"]["built_count"] == by_name["this model"]["exact_formula"]
    assert by_name["gpt3"]["built_count"] is None
    assert abs(by_name["gpt3"]["course_error"]) < 0.001
    assert 174e9 < by_name["gpt3"]["exact_formula"] < 176e9
    assert by_name["gpt2-small"]["exact_formula"] == 124_439_808  # GPT-2 small, tied head
    assert abs(by_name["this model"]["course_error"]) > 0.1


def test_attention_bytes_measured_equal_predicted():
    rows = scaling.attention_memory(num_heads=2, seq_lens=(8, 16, 32), batch=3, embed_dim=16)
    assert [r["predicted_bytes"] for r in rows] == [3 * 2 * t * t * 4 for t in (8, 16, 32)]
    assert all(r["measured_bytes"] == r["predicted_bytes"] for r in rows)


def test_kv_cache_bytes_measured_equal_predicted():
    model = GPT.from_config(SMALL[1])
    predicted = scaling.kv_cache_bytes_per_token(model.config)
    assert predicted == 2 * 3 * 64 * 4
    assert scaling.measured_kv_bytes_per_token(model) == predicted
    assert scaling.kv_cache_bytes_per_token(PRESETS["gpt3"]) == 2 * 96 * 12288 * 4


def test_run_scaling_writes_report_and_plot(tmp_path):
    out = tmp_path / "scaling"
    result = CliRunner().invoke(
        app, ["milestone", "run", "scaling", "--config", "nano", "--quick", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "scaling.png").read_bytes()[:4] == b"\x89PNG"
    assert summary["parameters"]["total"] == summary["parameter_scaling"][0]["built_count"]
    assert "KV cache" in said(result) and "attention matrix" in said(result)
    assert "code: reference modules 01 02" in said(result)  # whose code ran


def test_list_shows_every_milestone_ready():
    result = CliRunner().invoke(app, ["milestone", "list"])
    assert result.exit_code == 0
    for name in ("gpt", "attention", "scaling"):
        assert name in said(result)
    assert "missing" not in said(result)
