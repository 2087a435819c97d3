"""Without a graph, an input that fits in one of module 18's blocks skips the Function node:
accelerate's LayerNorm and GELU call the kernels' block functions (`_layernorm_rows`,
`_gelu_tanh`) on it directly, and the Linears of an accelerated attention layer or MLP the
lesson's `LinearFunction.forward`. Generation runs one row a token through here, where the node and
the blocking cost more than the arithmetic (issue 39: 10-16% more cached tokens a second)."""

import importlib

import numpy as np
import pytest

from tinytorch.accel import blocking
from tinytorch.accel.accelerate import accelerate
from tinytorch.accel.kernels import FusedGELU, FusedLayerNorm
from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.models.transformer import GPT

accel = importlib.import_module("tinytorch.accel.accelerate")


@pytest.fixture
def layers():
    np.random.seed(0)
    model = accelerate(GPT(vocab_size=17, embed_dim=16, num_layers=1, num_heads=4, max_seq_len=8))
    block = model.blocks[0]
    block.ln1.gamma.data[:] = np.linspace(0.5, 1.5, 16)  # not the identity's ones and zeros
    block.ln1.beta.data[:] = np.linspace(-0.2, 0.2, 16)
    return block.ln1, block.mlp.gelu


def inputs(rng):
    return (Tensor(rng.normal(size=(2, 3, 16)).astype(np.float32) * 3),
            Tensor(rng.normal(size=(2, 3, 64)).astype(np.float32) * 3))  # fmt: skip


def test_one_block_without_a_graph_gives_the_nodes_numbers_bit_for_bit(rng, layers):
    ln, gelu = layers
    x, h = inputs(rng)
    with no_grad():
        fast = ln(x).data, gelu(h).data
    node = (FusedLayerNorm.apply(x, ln.gamma, ln.beta, eps=ln.eps).data,
            FusedGELU.apply(h).data)  # fmt: skip
    for a, b in zip(fast, node):
        assert a.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_the_node_is_skipped_only_without_a_graph_and_within_one_block(rng, layers, monkeypatch):
    ln, gelu = layers
    x, h = inputs(rng)
    made = []
    for cls in (FusedLayerNorm, FusedGELU):
        apply = cls.apply.__func__

        def counting(kind, *args, _apply=apply, **kwargs):
            made.append(kind.__name__)
            return _apply(kind, *args, **kwargs)

        monkeypatch.setattr(cls, "apply", classmethod(counting))
    with no_grad():
        ln(x), gelu(h)
    assert made == []  # generation's path: the block functions, no node
    ln(x), gelu(h)  # autograd records: the nodes, for the backward
    assert made == ["FusedLayerNorm", "FusedGELU"]
    monkeypatch.setattr(blocking, "BLOCK", 32)  # more than one block: the blocked node
    with no_grad():
        ln(x), gelu(h)
    assert made[2:] == ["FusedLayerNorm", "FusedGELU"]


def test_cached_generation_gives_the_same_tokens_either_way(rng, monkeypatch):
    np.random.seed(1)
    model = accelerate(GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=12))
    prompt = rng.integers(0, 17, size=(1, 4))
    fast = model.generate(prompt, 6, temperature=0, use_cache=True)
    monkeypatch.setattr(accel, "_one_block", lambda x: False)  # always the Function nodes
    assert np.array_equal(model.generate(prompt, 6, temperature=0, use_cache=True), fast)


def test_the_attention_and_mlp_linears_skip_the_node_with_the_lessons_numbers(rng, monkeypatch):
    from tinytorch.accel.accelerate import FastLinear, plain
    from tinytorch.core.hooks import Listener, listen
    from tinytorch.core.layers import Linear, LinearFunction

    np.random.seed(2)
    model = accelerate(GPT(vocab_size=17, embed_dim=16, num_layers=1, num_heads=4, max_seq_len=8))
    block = model.blocks[0]
    linears = [block.attention.q_proj, block.attention.out_proj, block.mlp.linear1]
    assert all(type(lin).accelerated_by is FastLinear for lin in linears)
    x = Tensor(rng.normal(size=(1, 2, 16)).astype(np.float32))
    made = []
    apply = LinearFunction.apply.__func__

    def counting(kind, *args, **kwargs):
        made.append(kind.__name__)
        return apply(kind, *args, **kwargs)

    monkeypatch.setattr(LinearFunction, "apply", classmethod(counting))
    with no_grad():
        fast = [lin(x).data for lin in linears[:2]]
    assert made == []  # generation's projections: the lesson's forward, without the node
    node = [Linear.forward(lin, x).data for lin in linears[:2]]
    for a, b in zip(fast, node):
        np.testing.assert_array_equal(a, b)
    assert len(made) == 2
    linears[0](x)  # autograd records: the node
    with no_grad(), listen(Listener()):  # module 14's profiler: every node shows
        linears[0](x)
    assert len(made) == 4
    with pytest.raises(ValueError, match="its last axis must be 16"):
        with no_grad():
            linears[0](Tensor(np.ones((1, 3))))  # the lesson's error message
    plain(model)
    assert all(type(lin) is Linear for lin in linears)
