"""`tito milestone run llama`: a Llama and a GPT of one size, the same batches and CPU time."""

import json

import numpy as np
from typer.testing import CliRunner

from milestones import llama as milestone
from milestones.runs import load_run
from tinytorch.models.llama import Llama
from tinytorch.models.scaling import count_parameters
from tinytorch.models.transformer import GPT, PRESETS
from tito.cli.main import app

runner = CliRunner()
PROSE = (
    "The module reads a file and returns its lines. Each line is a string without its ending. "
    "When the file does not exist the function raises an error that names it.\n"
) * 60


def test_the_llama_matches_the_gpts_parameter_count():
    for name in ("nano", "tiny", "small"):
        np.random.seed(0)
        gpt = GPT.from_config(PRESETS[name])
        config = milestone.matched_llama(name, PRESETS[name].vocab_size, count_parameters(gpt))
        llama = Llama.from_config(config)
        assert config.num_kv_heads == PRESETS[name].num_heads // 2
        assert abs(count_parameters(llama) - count_parameters(gpt)) < 0.02 * count_parameters(gpt)


def test_a_run_compares_both_and_its_llama_exports(tmp_path, monkeypatch):
    monkeypatch.setitem(milestone.BUDGETS, "nano", milestone.Budget(4, 0.5, 3e-3, 2, 16, 1, 12))
    out, text = tmp_path / "run", tmp_path / "prose.txt"
    text.write_text(PROSE, encoding="utf-8")
    args = ["milestone", "run", "llama", "--config", "nano", "--data", text, "--out", out]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    gpt, llama = summary["models"]["GPT"], summary["models"]["Llama"]
    for r in (gpt, llama):
        assert r["cpu_seconds"] >= 0.5 and r["steps"] > 0 and len(r["sample"]) > 12
        assert 0 < r["val_bits_per_char"] < 8 and r["train_tokens_per_second"] > 0
    # half the kv heads: half the cache of the same width and depth
    assert llama["kv_bytes_per_token"] * 2 == gpt["kv_bytes_per_token"]
    assert gpt["kv_bytes_per_token"] == 2 * 2 * 32 * 4  # K and V, 2 layers, width 32, float32
    assert (out / "llama.png").read_bytes()[:4] == b"\x89PNG"
    assert "bits/char" in result.output and "Llama" in result.output
    assert "code: reference modules 01 02" in result.output  # whose code ran

    run = load_run(out)
    assert isinstance(run.model, Llama) and run.model.config.num_kv_heads == 1
    exported = runner.invoke(app, ["model", "export", str(out), str(tmp_path / "hf")])
    assert exported.exit_code == 0, exported.output
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["num_key_value_heads"] == 1
    assert (tmp_path / "hf" / "tokenizer.json").is_file()


def test_options_that_do_not_apply_are_refused(tmp_path):
    for option in (["--steps", "5"], ["--tokenizer", "bpe"], ["--config", "huge"]):
        result = runner.invoke(app, ["milestone", "run", "llama", "--out", tmp_path, *option])
        assert result.exit_code != 0
        assert option[0] in result.output or "huge" in result.output


def test_samples_are_printed_as_written_brackets_and_all():
    import io

    from rich.console import Console

    row = {"parameters": 1, "steps": 1, "val_bits_per_char": 2.0, "train_tokens_per_second": 1,
           "generate_tokens_per_second": 1, "kv_bytes_per_token": 8}  # fmt: skip
    sample = "x = d[key] and [bold]y[/bold]"
    console = Console(file=io.StringIO(), width=200)
    milestone.show({"models": {"Llama": {**row, "sample": sample}}}, console)
    assert repr(sample) in console.file.getvalue()
