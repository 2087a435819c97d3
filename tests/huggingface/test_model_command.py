"""`tito model export` on a milestone run, and `tito model import` back, through the CLI."""

import numpy as np
import pytest
import torch
from transformers import GPT2LMHeadModel
from typer.testing import CliRunner

from tinytorch.models.transformer import GPT
from tinytorch.models.weights import load_model, save_model
from tinytorch.text.tokenization import BPETokenizer, CharTokenizer
from tito.cli.main import app
from tito.cli.model import read_model

runner = CliRunner()
PROSE = "the cat sat on the mat. the dog ran to the park. the bird sang in the tree. " * 12


def said(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished `tito milestone run gpt` (tiny config, a few steps) and its export."""
    root = tmp_path_factory.mktemp("milestone")
    (root / "prose.txt").write_text(PROSE, encoding="utf-8")
    args = ["milestone", "run", "gpt", "--config", "tiny", "--steps", "20", "--tokenizer", "char"]
    result = runner.invoke(
        app, [*args, "--data", str(root / "prose.txt"), "--out", str(root / "gpt")]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["model", "export", str(root / "gpt"), str(root / "hf")])
    assert result.exit_code == 0, result.output
    return root, said(result)


def test_export_of_a_milestone_run_loads_in_transformers(run):
    root, output = run
    files = "config.json, model.safetensors, tinytorch_tokenizer.json, tokenizer.json"
    assert f"wrote {files}, tokenizer_config.json to {root / 'hf'}" in output
    model, tokenizer = read_model(root / "gpt")
    hf = GPT2LMHeadModel.from_pretrained(root / "hf")
    ids = np.asarray([tokenizer.encode("the dog ran to th")[: model.max_seq_len]])
    with torch.no_grad():
        theirs = hf(torch.from_numpy(ids)).logits.numpy()
    np.testing.assert_allclose(theirs, model(ids).data, rtol=0, atol=1e-5)
    saved = CharTokenizer.load(root / "hf" / "tinytorch_tokenizer.json")
    assert saved.vocab == tokenizer.vocab == sorted(set(PROSE))


def test_import_brings_the_export_back_exactly(run):
    root, _ = run
    result = runner.invoke(app, ["model", "import", str(root / "hf"), str(root / "back.npz")])
    assert result.exit_code == 0, result.output
    model, _ = read_model(root / "gpt")
    back = load_model(root / "back.npz")
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[key], value, err_msg=key)


def test_an_architecture_gpt2_lacks_is_refused_in_one_line(tmp_path):
    save_model(GPT(11, 8, 1, 2, 8, norm_first=False), tmp_path / "post.npz")
    result = runner.invoke(
        app, ["model", "export", str(tmp_path / "post.npz"), str(tmp_path / "hf")]
    )
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "post-norm blocks (norm_first=False)" in said(result)
    assert "Traceback" not in result.output and not (tmp_path / "hf").exists()


def test_a_missing_checkpoint_is_named(tmp_path):
    result = runner.invoke(
        app, ["model", "export", str(tmp_path / "nothing"), str(tmp_path / "hf")]
    )
    assert result.exit_code == 1
    assert f"error: no checkpoint at {tmp_path / 'nothing'}" in said(result)
    assert "tito milestone run gpt" in said(result)


def test_a_save_model_file_exports_with_a_given_bpe_tokenizer(tmp_path):
    tokenizer = BPETokenizer().train(PROSE, vocab_size=270)
    tokenizer.save(tmp_path / "bpe.json")
    model = GPT(tokenizer.vocab_size, 8, 1, 2, 8, tie_weights=True)
    save_model(model, tmp_path / "gpt.npz")
    args = [
        str(tmp_path / "gpt.npz"),
        str(tmp_path / "hf"),
        "--tokenizer",
        str(tmp_path / "bpe.json"),
    ]
    result = runner.invoke(app, ["model", "export", *args])
    assert result.exit_code == 0, result.output
    # tinytorch's own file for BPETokenizer.load, and Hugging Face's for AutoTokenizer
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json",
        "model.safetensors",
        "tinytorch_tokenizer.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    again = BPETokenizer.load(tmp_path / "hf" / "tinytorch_tokenizer.json")
    assert again.merges == tokenizer.merges


def test_import_of_a_missing_folder_says_so_first(tmp_path):
    result = runner.invoke(app, ["model", "import", str(tmp_path / "nowhere"), str(tmp_path / "x")])
    assert result.exit_code == 1 and "nowhere is not a folder" in said(result)
    assert "config.json and model.safetensors" in said(result)
    assert not (tmp_path / "x").exists()
