"""`tito model export` of a milestone run carries the run's own tokenizer: a BPE run (the
milestone's default tokenizer for its preset) and a `--quick` character run (`--tokenizer char`;
the quick run's default is BPE too) both round-trip
text through transformers, with the same token ids and the same greedy continuation."""

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, GPT2LMHeadModel
from typer.testing import CliRunner

from milestones.runs import load_run
from tinytorch.text.tokenization import BPETokenizer, CharTokenizer
from tito.cli.main import app

runner = CliRunner()
PROSE = (
    "the cat sat on the mat. the dog ran to the park! the bird sang in the tree, and the "
    "fox hid. then the cat and the dog sat together.\n\n"
) * 8
TEXTS = ["the dog sat", "then the bird ran to the cat.", "  the fox\n\nhid!"]  # prose characters


def _train_and_export(root, name, *args):
    out, hf = root / name, root / f"{name}-hf"
    result = runner.invoke(
        app,
        ["milestone", "run", "gpt", "--steps", "12", "--data", str(root / "prose.txt"),
         "--out", str(out), *args],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["model", "export", str(out), str(hf)])
    assert result.exit_code == 0, result.output
    return out, hf


@pytest.fixture(scope="module", params=["bpe", "quick"])
def exported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    (root / "prose.txt").write_text(PROSE, encoding="utf-8")
    if request.param == "bpe":
        out, hf = _train_and_export(root, "gpt", "--config", "nano", "--tokenizer", "bpe")
    else:
        out, hf = _train_and_export(root, "gpt", "--quick", "--tokenizer", "char", "--steps", "30")
    return request.param, load_run(out), hf


def test_the_run_keeps_the_tokenizer_it_trained_with(exported):
    kind, run, _ = exported
    expected = BPETokenizer if kind == "bpe" else CharTokenizer
    assert isinstance(run.tokenizer, expected)
    assert run.tokenizer.vocab_size == run.model.vocab_size  # the review's 18 against 279
    if kind == "bpe":
        assert run.tokenizer.vocab_size > 256  # merges learned from the prose


def test_transformers_tokenizer_gives_the_same_ids_and_text(exported):
    _, run, hf = exported
    theirs = AutoTokenizer.from_pretrained(hf)
    for text in TEXTS:
        ours = list(run.tokenizer.encode(text))
        assert theirs.encode(text) == ours, text
        assert theirs.decode(ours) == run.tokenizer.decode(ours) == text


def test_the_exported_model_writes_the_same_greedy_text(exported):
    _, run, hf = exported
    model, tokenizer = GPT2LMHeadModel.from_pretrained(hf), AutoTokenizer.from_pretrained(hf)
    prompt = "the cat"
    ids = np.asarray([run.tokenizer.encode(prompt)])
    new = run.model.max_seq_len - ids.shape[1]
    ours = run.model.generate(ids, max_new_tokens=new, temperature=0, use_cache=False)
    with torch.no_grad():
        theirs = model.generate(
            torch.tensor(tokenizer.encode(prompt))[None], max_new_tokens=new, do_sample=False,
            pad_token_id=0,
        ).numpy()  # fmt: skip
    np.testing.assert_array_equal(theirs, ours)
    assert tokenizer.decode(theirs[0]) == run.tokenizer.decode(ours[0].tolist())
