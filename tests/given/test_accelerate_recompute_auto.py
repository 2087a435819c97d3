"""accelerate's default `recompute=None`: attention and GELU recompute their largest array in
the backward when it has at least AUTO_VALUES values, keep it when smaller, and the gradients
are the same either way."""

import importlib

import numpy as np
import pytest
from fdcheck import check_function

from tinytorch.accel.kernels import FusedGELU
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor
from tinytorch.models.transformer import GPT

acc = importlib.import_module("tinytorch.accel.accelerate")  # the module, not its function


def gpt():
    np.random.seed(0)
    return GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)


def attention_layers(model):
    return [b.attention for b in model.blocks]


@pytest.mark.parametrize("limit, recomputes", [(4 * 8 * 8, True), (4 * 8 * 8 + 1, False)])
def test_auto_recomputes_exactly_the_large_arrays(rng, monkeypatch, limit, recomputes):
    monkeypatch.setattr(acc, "AUTO_VALUES", limit)  # one row: (1, 4 heads, 8, 8) weights
    model = acc.accelerate(gpt(), workers=1)
    assert all(layer.recompute is None for layer in attention_layers(model))
    gelus = []
    original = FusedGELU.forward

    def spy(self, x, recompute=False):
        gelus.append((x.size, recompute))
        return original(self, x, recompute=recompute)

    monkeypatch.setattr(FusedGELU, "forward", spy)
    for layer in attention_layers(model):
        layer.keep_attention = True
    logits = model(Tensor(rng.integers(0, 17, (1, 8))))
    kept = [layer.last_attention is not None for layer in attention_layers(model)]
    assert kept == [not recomputes] * 2  # a recomputing layer keeps no weights
    assert gelus and all(flag == (size >= limit) for size, flag in gelus)
    cross_entropy(logits, rng.integers(0, 17, (1, 8))).backward()


def test_auto_gives_the_gradients_of_keeping(rng, monkeypatch):
    x, y = rng.integers(0, 17, (3, 8)), rng.integers(0, 17, (3, 8))
    grads = []
    for limit in (1, 1 << 30):  # everything recomputed, nothing recomputed
        monkeypatch.setattr(acc, "AUTO_VALUES", limit)
        model = acc.accelerate(gpt(), workers=1)
        cross_entropy(model(Tensor(x)), y).backward()
        grads.append([p.grad for p in model.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_the_recomputed_mlp_backward_matches_finite_differences(rng):
    x = rng.standard_normal((2, 3, 4))
    w1, b1 = rng.standard_normal((4, 8)) * 0.5, rng.standard_normal(8) * 0.1
    w2, b2 = rng.standard_normal((8, 4)) * 0.5, rng.standard_normal(4) * 0.1
    check_function(acc.RecomputedMLP, x, w1, b1, w2, b2, rtol=1e-5, atol=1e-7)


def test_the_recomputed_mlp_keeps_no_gelu_output(rng, monkeypatch):
    monkeypatch.setattr(acc, "AUTO_VALUES", 1)
    model = acc.accelerate(gpt(), workers=1)
    mlp = model.blocks[0].mlp
    assert "gelu" in acc.accelerated(model) and mlp.recompute is None
    out = mlp(Tensor(rng.standard_normal((2, 3, 16)).astype(np.float32), requires_grad=True))
    node = out._ctx
    assert isinstance(node, acc.RecomputedMLP)
    assert node.second.rows is None and node.hidden.shape == (2, 3, 64)
    monkeypatch.setattr(acc, "AUTO_VALUES", 1 << 30)  # small: the lesson's three nodes
    assert not isinstance(
        mlp(Tensor(np.ones((2, 3, 16)), requires_grad=True))._ctx, acc.RecomputedMLP
    )
