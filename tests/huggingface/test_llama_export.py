"""tinytorch Llama -> Hugging Face LlamaForCausalLM -> tinytorch: the same logits within 1e-5,
the same greedy tokens, and the tokenizer with it; Meta's and Hugging Face's names load back.

transformers and torch are the test-time oracle (the `hf` extra, installed by `make test`).
"""

import json

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, LlamaForCausalLM

from tinytorch.core.tensor import Tensor
from tinytorch.models.huggingface import UnsupportedArchitecture
from tinytorch.models.llama import Llama
from tinytorch.models.llama_weights import (
    from_halves,
    load_llama,
    save_llama,
    to_halves,
    to_hf_state_dict,
)
from tinytorch.models.weights import save_model
from tinytorch.text.tokenization import CharTokenizer

TEXT = "the cat sat on the mat.\nthe dog ran to the park. "


def randomised(seed: int, **changes) -> Llama:
    np.random.seed(seed)
    sizes = dict(vocab_size=21, embed_dim=32, num_layers=2, num_heads=4, num_kv_heads=2,
                 max_seq_len=16, multiple_of=16, rope_theta=500.0)  # fmt: skip
    model = Llama(**{**sizes, **changes})
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():  # large enough to move every logit
        if name.endswith("norm.weight"):
            p.data[...] = rng.uniform(0.5, 1.5, p.shape)
        else:
            p.data[...] = rng.normal(0.0, 0.3, p.shape)
    return model


def hf_logits(folder, tokens) -> np.ndarray:
    hf = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return hf(torch.as_tensor(tokens)).logits.numpy()


def test_halves_permutation_round_trips(rng):
    w = rng.normal(size=(12, 5))
    np.testing.assert_array_equal(from_halves(to_halves(w, 3), 3), w)
    # within a head of 4: interleaved pairs (0, 1), (2, 3) become halves (0, 2), (1, 3)
    np.testing.assert_array_equal(to_halves(np.arange(4)[:, None], 1)[:, 0], [0, 2, 1, 3])


@pytest.mark.parametrize("kv_heads, tie", [(2, False), (1, True), (4, False)])
def test_exported_logits_equal_ours(tmp_path, rng, kv_heads, tie):
    model = randomised(kv_heads, num_kv_heads=kv_heads, tie_weights=tie)
    tokens = rng.integers(0, 21, (2, 16))
    ours = model(Tensor(tokens)).data
    save_llama(model, tmp_path)
    theirs = hf_logits(tmp_path, tokens)
    assert np.abs(ours).max() > 1  # logits that mean something
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-5)
    hf = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    with torch.no_grad():
        greedy = hf.generate(torch.as_tensor(tokens[:, :4]), max_new_tokens=8, do_sample=False)
    mine = model.generate(tokens[:, :4], max_new_tokens=8, temperature=0)
    np.testing.assert_array_equal(greedy.numpy(), mine)


def test_export_round_trips_and_carries_the_tokenizer(tmp_path, rng):
    tokenizer = CharTokenizer.from_text(TEXT)
    model = randomised(3, vocab_size=tokenizer.vocab_size)
    written = save_llama(model, tmp_path, tokenizer)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(written)
    back = load_llama(tmp_path)
    for (name, p), q in zip(model.named_parameters(), back.parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    auto = AutoTokenizer.from_pretrained(tmp_path)
    assert auto(TEXT)["input_ids"] == tokenizer.encode(TEXT)
    assert auto.decode(tokenizer.encode(TEXT)) == TEXT


def test_load_state_dict_reads_hugging_face_and_meta_names(rng):
    model = randomised(4)
    state = {k: torch.from_numpy(v) for k, v in to_hf_state_dict(model).items()}
    again = randomised(5)
    again.load_state_dict(state)
    tokens = rng.integers(0, 21, (1, 10))
    np.testing.assert_allclose(again(tokens).data, model(tokens).data, atol=1e-6)

    meta = {
        "tok_embeddings.weight": model.token_embedding.weight.data,
        "norm.weight": model.norm.weight.data,
        "output.weight": model.lm_head.weight.data.T,
    }
    for i, block in enumerate(model.blocks):
        meta[f"layers.{i}.attention_norm.weight"] = block.attention_norm.weight.data
        meta[f"layers.{i}.ffn_norm.weight"] = block.ffn_norm.weight.data
        for ours, theirs in (("q_proj", "wq"), ("k_proj", "wk"), ("v_proj", "wv"),
                             ("out_proj", "wo")):  # fmt: skip
            w = getattr(block.attention, ours).weight.data.T  # (out, in), interleaved as ours
            meta[f"layers.{i}.attention.{theirs}.weight"] = w
        for w in ("w1", "w2", "w3"):
            meta[f"layers.{i}.feed_forward.{w}.weight"] = getattr(
                block.feed_forward, w
            ).weight.data.T
    third = randomised(6)
    third.load_state_dict(meta)
    np.testing.assert_allclose(third(tokens).data, model(tokens).data, atol=1e-6)
    with pytest.raises(KeyError, match="missing keys"):
        third.load_state_dict({k: v for k, v in meta.items() if k != "norm.weight"})


def test_a_trained_milestone_run_exports_with_equal_logits(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from milestones import llama as milestone
    from milestones.runs import load_run
    from tito.cli.main import app

    monkeypatch.setitem(milestone.BUDGETS, "nano", milestone.Budget(4, 0.5, 3e-3, 2, 16, 1, 8))
    runner, out, folder = CliRunner(), tmp_path / "run", tmp_path / "hf"
    data = tmp_path / "prose.txt"
    data.write_text(TEXT * 40, encoding="utf-8")
    args = ["milestone", "run", "llama", "--config", "nano", "--data", data, "--out", out]
    trained = runner.invoke(app, args)
    assert trained.exit_code == 0, trained.output
    exported = runner.invoke(app, ["model", "export", str(out), str(folder)])
    assert exported.exit_code == 0 and "LlamaForCausalLM" in exported.output, exported.output
    run = load_run(out)
    text = "the dog sat on"
    ids = np.array([AutoTokenizer.from_pretrained(folder)(text)["input_ids"]])
    np.testing.assert_array_equal(ids[0], run.vocab.encode(text))
    np.testing.assert_allclose(hf_logits(folder, ids), run.model(ids).data, rtol=0, atol=1e-5)


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8}  # fmt: skip


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"rope_parameters": {**LLAMA3_ROPE, "rope_theta": 500.0}}, "rope_parameters"),
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}},
         "rope_parameters"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"attention_bias": True}, "attention_bias"),
        ({"mlp_bias": True}, "mlp_bias"),
        ({"head_dim": 16}, "head_dim"),
    ],
)  # fmt: skip
def test_load_llama_refuses_what_module_21_cannot_compute(tmp_path, changes, field):
    """transformers' own folder, with a setting our Llama would silently compute differently:
    one line naming the field and its value, before any weight is read."""
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=21, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=16, **changes)  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    value = json.loads((tmp_path / "config.json").read_text())[field]
    with pytest.raises(UnsupportedArchitecture) as caught:
        load_llama(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"tinytorch's Llama cannot express {field}={value!r}")
    assert "\n" not in message


def test_load_llama_refuses_transformers_4s_rope_scaling(tmp_path):
    """Llama 3.1 and 3.2 checkpoints on the Hub say rope_scaling (transformers 4's spelling)."""
    save_llama(randomised(7), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("rope_parameters")
    config["rope_scaling"] = LLAMA3_ROPE
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitecture, match=r"rope_scaling=\{'rope_type': 'llama3'"):
        load_llama(tmp_path)
    config["rope_scaling"] = {"rope_type": "default"}  # no scaling: reads
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert load_llama(tmp_path).config.rope_theta == 500.0


def test_a_save_model_file_of_a_llama_exports(tmp_path, rng):
    """docs/huggingface.md: `tito model export` takes a file written by save_model."""
    from typer.testing import CliRunner

    from tito.cli.main import app

    model = randomised(8, num_kv_heads=1)
    save_model(model, tmp_path / "llama.npz")
    folder = tmp_path / "hf"
    exported = CliRunner().invoke(app, ["model", "export", str(tmp_path / "llama.npz"),
                                        str(folder)])  # fmt: skip
    assert exported.exit_code == 0 and "LlamaForCausalLM" in exported.output, exported.output
    tokens = rng.integers(0, 21, (2, 12))
    np.testing.assert_allclose(hf_logits(folder, tokens), model(tokens).data, rtol=0, atol=1e-5)
