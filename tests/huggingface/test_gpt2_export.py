"""tinytorch GPT -> Hugging Face GPT2LMHeadModel -> tinytorch: same logits, same tokens, same bits.

transformers and torch are the test-time oracle (the `hf` extra, installed by `make test`).
"""

import json
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.models.huggingface import (
    UnsupportedArchitecture,
    load_gpt2,
    save_gpt2,
    to_gpt2_state_dict,
)
from tinytorch.models.transformer import GPT
from tinytorch.text.tokenization import CharTokenizer

TEXT = "the cat sat on the mat.\nthe dog ran to the park. " * 8
CONTEXT = 12


def randomise(model: GPT, seed: int) -> GPT:
    """Every weight, bias and norm parameter drawn at random, large enough to move the logits."""
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():
        p.data[...] = rng.normal(0.0, 0.3, p.shape) + (1.0 if name.endswith("gamma") else 0.0)
    if model.lm_head is not None:
        model.lm_head.bias.data[...] = 0  # GPT-2's lm_head has no bias
    return model


def trained_model() -> tuple[GPT, CharTokenizer, list[float]]:
    """A tied tiny GPT after 40 AdamW steps on TEXT, with its loss curve."""
    tokenizer = CharTokenizer.from_text(TEXT)
    ids = np.asarray(tokenizer.encode(TEXT))
    np.random.seed(0)
    model = GPT(tokenizer.vocab_size, 16, 2, 2, max_seq_len=CONTEXT, tie_weights=True)
    optimizer = AdamW(model.parameters(), lr=1e-2)
    rng, losses = np.random.default_rng(0), []
    for _ in range(40):
        starts = rng.integers(0, len(ids) - CONTEXT - 1, size=8)
        x = np.stack([ids[s : s + CONTEXT] for s in starts])
        y = np.stack([ids[s + 1 : s + CONTEXT + 1] for s in starts])
        loss = cross_entropy(model(Tensor(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.data))
    return model, tokenizer, losses


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> (tinytorch model, export folder, the folder loaded by transformers, prompt ids)."""
    trained, tokenizer, losses = trained_model()
    assert losses[-1] < losses[0] - 1.0  # it did learn: the check below compares a trained model
    models = {
        "trained": (trained, tokenizer, np.asarray([tokenizer.encode("the cat sat "[:CONTEXT])])),
        "random-tied": (randomise(GPT(23, 16, 2, 4, CONTEXT, tie_weights=True), 1), None, None),
        "random-untied": (
            randomise(GPT(23, 16, 2, 4, CONTEXT, mlp_ratio=3, tie_weights=False), 2),
            None,
            None,
        ),
    }
    out = {}
    for name, (model, tok, prompt) in models.items():
        folder = tmp_path_factory.mktemp(name)
        save_gpt2(model, folder, tok)
        if prompt is None:
            prompt = np.random.default_rng(3).integers(0, model.vocab_size, size=(2, CONTEXT))
        hf = GPT2LMHeadModel.from_pretrained(folder)
        out[name] = (model, folder, hf, prompt)
    return out


MODELS = ["trained", "random-tied", "random-untied"]


@pytest.mark.parametrize("name", MODELS)
def test_transformers_gives_the_same_logits(exported, name):
    model, _, hf, ids = exported[name]
    with torch.no_grad():
        theirs = hf(torch.from_numpy(ids)).logits.numpy()
    ours = model(ids).data
    assert theirs.shape == ours.shape
    assert np.abs(ours).max() > 0.5  # logits that differ between tokens, not a near-zero model
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_greedy_generation_gives_the_same_tokens(exported, name):
    model, _, hf, ids = exported[name]
    prompt = ids[:, :3]
    new = CONTEXT - 3  # GPT-2 has no position past n_positions
    ours = model.generate(prompt, max_new_tokens=new, temperature=0)
    theirs = hf.generate(torch.from_numpy(prompt), max_new_tokens=new, do_sample=False)
    np.testing.assert_array_equal(theirs.numpy(), ours)


@pytest.mark.parametrize("name", MODELS)
def test_round_trip_back_to_tinytorch_is_exact(exported, name):
    model, folder, _, _ = exported[name]
    back = load_gpt2(folder)
    assert asdict(back.config) == asdict(model.config)
    ours, again = model.state_dict(), back.state_dict()
    assert ours.keys() == again.keys()
    for key in ours:
        assert again[key].dtype == ours[key].dtype == np.float32
        np.testing.assert_array_equal(again[key], ours[key], err_msg=key)


def test_config_names_gpt2_settings(exported):
    config = json.loads((exported["random-untied"][1] / "config.json").read_text())
    assert (config["n_embd"], config["n_layer"], config["n_head"]) == (16, 2, 4)
    assert config["n_inner"] == 48 and config["n_positions"] == CONTEXT
    assert config["activation_function"] == "gelu_new"  # our GELU is the tanh approximation
    assert config["tie_word_embeddings"] is False
    tied = json.loads((exported["random-tied"][1] / "config.json").read_text())
    assert tied["tie_word_embeddings"] is True
    assert "lm_head.weight" not in to_gpt2_state_dict(exported["random-tied"][0])


def test_tokenizer_is_saved_beside_the_model(exported):
    model, folder, hf, _ = exported["trained"]
    tokenizer = CharTokenizer.load(folder / "tinytorch_tokenizer.json")
    assert tokenizer.vocab == CharTokenizer.from_text(TEXT).vocab
    theirs = AutoTokenizer.from_pretrained(folder)  # tokenizer.json: one token per character
    text = "the dog sat.\n on  the cat"
    assert theirs.encode(text) == tokenizer.encode(text)
    assert theirs.decode(tokenizer.encode(text)) == text
    prompt = theirs("the d", return_tensors="pt").input_ids
    out = hf.generate(prompt, max_new_tokens=7, do_sample=False)[0].tolist()
    ours = model.generate(np.asarray([tokenizer.encode("the d")]), 7, temperature=0)
    assert out == ours[0].tolist()


@pytest.mark.parametrize("tied, shard", [(True, None), (False, None), (True, "4KB")])
def test_a_checkpoint_written_by_save_pretrained_loads_exactly(tmp_path, tied, shard):
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=19, n_positions=10, n_embd=12, n_layer=2, n_head=3,
        tie_word_embeddings=tied, bos_token_id=None, eos_token_id=None,
    )  # fmt: skip
    hf = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)  # biases and norms too, not only the initialised weights
    hf.save_pretrained(tmp_path / "hf", **({"max_shard_size": shard} if shard else {}))
    assert (tmp_path / "hf" / "model.safetensors.index.json").exists() == bool(shard)
    model = load_gpt2(tmp_path / "hf")
    ids = np.arange(20).reshape(2, 10) % 19
    with torch.no_grad():
        theirs = hf(torch.from_numpy(ids)).logits.numpy()
    np.testing.assert_allclose(model(ids).data, theirs, rtol=0, atol=1e-5)
    exported = to_gpt2_state_dict(model)
    for key, value in hf.state_dict().items():
        if key == "lm_head.weight" and tied:
            assert key not in exported
            continue
        np.testing.assert_array_equal(exported[key], value.numpy(), err_msg=key)


def refusal(model, tmp_path) -> str:
    with pytest.raises(UnsupportedArchitecture) as info:
        save_gpt2(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before anything was written
    message = str(info.value)
    assert "\n" not in message and message.startswith("GPT-2 cannot express")
    return message


def test_post_norm_is_refused(tmp_path):
    assert "norm_first=False" in refusal(GPT(11, 8, 1, 2, 8, norm_first=False), tmp_path)


def test_sinusoidal_positions_are_refused(tmp_path):
    assert "position='sinusoidal'" in refusal(GPT(11, 8, 1, 2, 8, position="sinusoidal"), tmp_path)


def test_a_trained_untied_head_bias_is_refused(tmp_path):
    model = GPT(11, 8, 1, 2, 8, tie_weights=False)
    model.lm_head.bias.data[3] = 0.5
    assert "lm_head.bias" in refusal(model, tmp_path)


def test_a_gpt2_config_tinytorch_cannot_express_is_refused(tmp_path):
    save_gpt2(GPT(11, 8, 1, 2, 8, tie_weights=True), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["activation_function"] = "gelu"  # the exact erf GELU, not our tanh approximation
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitecture, match="activation_function='gelu'"):
        load_gpt2(tmp_path)


def test_the_export_imports_neither_torch_nor_transformers(tmp_path):
    code = (
        "import sys\n"
        "from tinytorch.models.huggingface import save_gpt2, load_gpt2\n"
        "from tinytorch.models.transformer import GPT\n"
        "assert 'safetensors' not in sys.modules\n"  # imported only when an export is asked for
        f"save_gpt2(GPT(11, 8, 1, 2, 8), {str(tmp_path)!r})\n"
        f"load_gpt2({str(tmp_path)!r})\n"
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_missing_extra_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ImportError, match=r"tinytorch-course\[hf\]") as info:
        save_gpt2(GPT(11, 8, 1, 2, 8, tie_weights=True), tmp_path)
    assert "\n" not in str(info.value)
