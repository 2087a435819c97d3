"""Variants built from the same parts: sinusoidal positions in GPT, a padded encoder batch."""

import numpy as np
import oracle
import pytest

from tinytorch.core.attention import padding_mask, plot_attention
from tinytorch.core.embeddings import sinusoidal_table
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformer import GPT, GPTConfig, Seq2SeqTransformer, TransformerEncoder
from tinytorch.models.scaling import count_parameters, estimate_parameters
from tinytorch.models.weights import (
    load_model,
    load_torch_state_dict,
    save_model,
    to_torch_state_dict,
)

SIZES = dict(vocab_size=23, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=12)


def small_gpt(seed=0, **overrides):
    np.random.seed(seed)
    return GPT(**{**SIZES, **overrides})


def test_seed_signature_keeps_learned_positions():
    np.random.seed(0)
    gpt = GPT(23, 16, 2, 4, max_seq_len=12)  # the seed's positional call
    assert gpt.config.position == "learned"
    assert gpt.position_embedding.weight.shape == (12, 16)
    assert "position_embedding.weight" in dict(gpt.named_parameters())
    assert GPTConfig(23, 16, 2, 4).position == "learned"


def test_sinusoidal_positions_have_no_weights():
    learned, sinusoidal = small_gpt(), small_gpt(position="sinusoidal")
    names = [name for name, _ in sinusoidal.named_parameters()]
    assert not any(name.startswith("position_embedding") for name in names)
    assert count_parameters(learned) - count_parameters(sinusoidal) == 12 * 16
    assert estimate_parameters(sinusoidal.config)["exact"] == count_parameters(sinusoidal)
    assert "position_embedding.weight" not in sinusoidal.state_dict()


def test_sinusoidal_forward_shapes_and_gradients(rng):
    gpt = small_gpt(position="sinusoidal")
    tokens = rng.integers(0, 23, (3, 12))
    logits = gpt(tokens)
    assert logits.shape == (3, 12, 23) and logits.dtype == np.float32
    cross_entropy(logits[:, :-1], tokens[:, 1:]).backward()
    assert all(p.grad is not None and np.isfinite(p.grad).all() for p in gpt.parameters())


def test_sinusoidal_positions_are_module_11s_table(rng):
    sinusoidal = small_gpt(seed=4, position="sinusoidal")
    learned = small_gpt(seed=8)
    state = sinusoidal.state_dict()
    state["position_embedding.weight"] = sinusoidal_table(12, 16)
    learned.load_state_dict(state)  # the same model, with the table as "learned" weights
    tokens = rng.integers(0, 23, (2, 9))
    np.testing.assert_allclose(sinusoidal(tokens).data, learned(tokens).data, atol=1e-6)


@pytest.mark.parametrize("norm_first", [True, False])
def test_sinusoidal_logits_and_gradients_match_torch(norm_first):
    # the torch.nn GPT of tests/torch_reference.py (float64), weights off the init from a seed
    case = oracle.load(__file__).case(f"sinusoidal/{norm_first}")
    gpt = small_gpt(seed=6, position="sinusoidal", norm_first=norm_first)
    load_torch_state_dict(gpt, oracle.torch_state(case))
    assert not case["position_weights"]  # torch's model has no position weights either
    logits = gpt(case["tokens"])
    (logits * Tensor(case["weight"])).sum().backward()
    np.testing.assert_allclose(logits.data, case["logits"], atol=1e-4)
    ref_grads = oracle.torch_grads(case)
    ours = [k for k in to_torch_state_dict(gpt) if k in ref_grads]  # our order, torch names
    assert len(ours) == len(gpt.parameters())
    for (name, p), key in zip(gpt.named_parameters(), ours):
        got = p.grad.T if p.grad.ndim == 2 and "embedding" not in name else p.grad
        expected = ref_grads[key]
        error = np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-3)
        assert error < 1e-4, (name, error)


@pytest.mark.parametrize(
    "variant",
    [{"norm_first": False}, {"position": "sinusoidal"}, {"tie_weights": True, "norm_first": False}],
    ids=["post-norm", "sinusoidal", "tied-post-norm"],
)
def test_every_variant_is_causal(rng, variant):
    gpt = small_gpt(seed=9, **variant)
    tokens = rng.integers(0, 23, (2, 10))
    logits = gpt(tokens).data
    for t in range(9):
        changed = tokens.copy()
        changed[:, t + 1 :] = (tokens[:, t + 1 :] + 1 + rng.integers(0, 22, (2, 9 - t))) % 23
        after = gpt(changed).data
        np.testing.assert_array_equal(after[:, : t + 1], logits[:, : t + 1])
        assert not np.allclose(after[:, -1], logits[:, -1])  # the change itself is seen


def test_sinusoidal_generation_is_the_same_with_module_17s_cache_and_without(rng):
    gpt = small_gpt(seed=2, position="sinusoidal")
    prompt = rng.integers(0, 23, (2, 5))  # 5 + 15 new tokens slides past max_seq_len=12
    cached = gpt.generate(prompt, max_new_tokens=15, temperature=0)
    plain = gpt.generate(prompt, max_new_tokens=15, temperature=0, use_cache=False)
    assert cached.shape == (2, 20)
    np.testing.assert_array_equal(cached, plain)


def test_sinusoidal_save_load_keeps_the_option(tmp_path, rng):
    gpt = small_gpt(seed=5, position="sinusoidal", tie_weights=True)
    path = tmp_path / "gpt.npz"
    save_model(gpt, path)
    with np.load(path, allow_pickle=False) as archive:
        assert not any(k.startswith("position_embedding") for k in archive.files)
    again = load_model(path)
    assert again.config == gpt.config and again.config.position == "sinusoidal"
    tokens = rng.integers(0, 23, (2, 6))
    np.testing.assert_array_equal(again(tokens).data, gpt(tokens).data)


def test_from_config_and_bad_position():
    cfg = GPTConfig(23, 16, 2, 4, max_seq_len=12, position="sinusoidal")
    assert GPT.from_config(cfg).config == cfg
    with pytest.raises(ValueError, match=r"position must be one of \['learned', 'sinusoidal'\]"):
        small_gpt(position="rotary")


def test_encoder_ignores_padded_tokens_under_a_padding_mask():
    np.random.seed(3)
    enc = TransformerEncoder(vocab_size=10, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=8)
    lengths = np.array([6, 3])
    tokens = np.array([[1, 2, 3, 4, 5, 6], [7, 8, 9, 0, 0, 0]])
    mask = padding_mask(lengths, 6)
    h = enc(Tensor(tokens), mask=mask).data
    assert h.shape == (2, 6, 16)
    other = tokens.copy()
    other[1, 3:] = [5, 1, 2]  # only the padding changes
    again = enc(other, mask=mask).data
    np.testing.assert_allclose(again[0], h[0], atol=1e-6)
    np.testing.assert_allclose(again[1, :3], h[1, :3], atol=1e-6)
    alone = enc(tokens[1:, :3]).data[0]  # the short row encoded without any padding
    np.testing.assert_allclose(h[1, :3], alone, atol=1e-5)
    unmasked = enc(other).data  # without the mask the padding leaks into real positions
    assert not np.allclose(unmasked[1, :3], enc(tokens).data[1, :3], atol=1e-4)


def test_gpt_attention_weights_read_out_causal_and_drawn(tmp_path, rng):
    gpt = small_gpt(seed=7)
    tokens = rng.integers(0, 23, (2, 6))
    gpt(tokens)
    future = np.triu(np.ones((6, 6), dtype=bool), k=1)  # key after query
    for block in gpt.blocks:  # every layer keeps its last weights, (B, H, T, T)
        weights = block.attention.last_attention
        assert weights.shape == (2, 4, 6, 6)
        np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
        assert np.all(weights[..., future] == 0) and np.all(weights[..., ~future] > 0)
    labels = [str(t) for t in tokens[1]]
    path = plot_attention(
        gpt.blocks[-1].attention.last_attention, labels, tmp_path / "gpt.png", batch=1
    )
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_seq2seq_ignores_padded_source_tokens():
    np.random.seed(4)
    model = Seq2SeqTransformer(
        vocab_size=10, embed_dim=16, num_layers=1, num_heads=4, max_seq_len=8
    )
    source = np.array([[1, 2, 3, 4, 5], [6, 7, 0, 0, 0]])
    target = np.array([[9, 1, 2], [9, 6, 7]])
    mask = padding_mask([5, 2], 5)
    logits = model(source, target, source_mask=mask).data
    other = source.copy()
    other[1, 2:] = [3, 8, 1]  # only the padding changes
    np.testing.assert_allclose(model(other, target, source_mask=mask).data, logits, atol=1e-6)
    alone = model(source[1:, :2], target[1:]).data[0]  # the short source without padding
    np.testing.assert_allclose(logits[1], alone, atol=1e-5)
    assert not np.allclose(model(other, target).data[1], model(source, target).data[1])
    out = model.generate(source, start_token=9, max_new_tokens=3, source_mask=mask)
    again = model.generate(other, start_token=9, max_new_tokens=3, source_mask=mask)
    assert out.shape == (2, 4)
    np.testing.assert_array_equal(out, again)


def test_an_interrupted_save_model_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "gpt.npz"
    save_model(small_gpt(seed=1), path)
    before = path.read_bytes()

    def crash(handle, **arrays):
        handle.write(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        save_model(small_gpt(seed=2), path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["gpt.npz"]


def test_save_model_writes_module_07s_checkpoint_format(tmp_path):
    from tinytorch.core.training import load_checkpoint, read_checkpoint, save_checkpoint

    gpt = small_gpt(seed=4)
    save_model(gpt, tmp_path / "gpt.npz")
    weights, _, _, extra, _ = read_checkpoint(tmp_path / "gpt.npz")
    assert extra["gpt_config"]["embed_dim"] == gpt.config.embed_dim
    other = small_gpt(seed=9)
    load_checkpoint(tmp_path / "gpt.npz", other)  # the one format: module 07 loads it
    for (name, a), (_, b) in zip(gpt.named_parameters(), other.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data, err_msg=name)
    save_checkpoint(tmp_path / "plain.npz", gpt)  # no configuration: load_model says so
    with pytest.raises(ValueError, match="without a model configuration"):
        load_model(tmp_path / "plain.npz")
