"""Module 18's kernels in cache-sized blocks: any block size gives the lesson's numbers, float32
stays float32, and the heads' memory order lets the caller merge them without a copy."""

import numpy as np
import pytest
from fdcheck import check_function
from fdcheck import weighted_grads as _grads

from tinytorch.accel import blocking
from tinytorch.accel.kernels import FusedAttention, FusedGELU, FusedLayerNorm, QKVProjection
from tinytorch.core.activations import gelu
from tinytorch.core.attention import causal_mask, padding_mask, scaled_dot_product_attention
from tinytorch.core.tensor import Tensor
from tinytorch.nn import LayerNorm


def _same(fast, lesson):
    (a, a_grads), (b, b_grads) = fast, lesson
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for x, y in zip(a_grads, b_grads):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("block", [7, 50, 1 << 16])  # many blocks, a ragged last one, one block
@pytest.mark.parametrize("recompute", [False, True])
def test_gelu_in_blocks_equals_the_lesson(rng, monkeypatch, block, recompute):
    monkeypatch.setattr(blocking, "BLOCK", block)
    x, weight = rng.normal(size=(3, 5, 11)), rng.normal(size=(3, 5, 11))
    fast = _grads(lambda t: FusedGELU.apply(t, recompute=recompute), x, weight=weight)
    _same(fast, _grads(gelu, x, weight=weight))
    check_function(FusedGELU, x, kwargs={"recompute": recompute})


@pytest.mark.parametrize("block", [8, 30, 1 << 16])
def test_layernorm_in_blocks_equals_the_lesson(rng, monkeypatch, block):
    monkeypatch.setattr(blocking, "BLOCK", block)
    x, weight = rng.normal(2.0, 3.0, size=(4, 5, 8)), rng.normal(size=(4, 5, 8))
    gamma, beta = rng.normal(size=8), rng.normal(size=8)

    def lesson(xt, g, b):
        ln = LayerNorm(8)
        ln.gamma, ln.beta = g, b
        return ln(xt)

    fast = _grads(lambda *t: FusedLayerNorm.apply(*t), x, gamma, beta, weight=weight)
    _same(fast, _grads(lesson, x, gamma, beta, weight=weight))
    check_function(FusedLayerNorm, x, gamma, beta)


@pytest.mark.parametrize("block", [1, 40, 1 << 16])  # one batch row per block, two, all
@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("mask", ["causal", "padding"])
def test_attention_in_blocks_equals_the_lesson(rng, monkeypatch, block, recompute, mask):
    monkeypatch.setattr(blocking, "BLOCK", block)
    q, k, v, weight = (rng.normal(size=(3, 2, 5, 4)) for _ in range(4))
    m = causal_mask(5) if mask == "causal" else padding_mask([5, 3, 1], 5)  # (B, 1, 1, T)
    fast = _grads(
        lambda *t: FusedAttention.apply(*t, mask=m, recompute=recompute), q, k, v, weight=weight
    )
    _same(fast, _grads(lambda *t: scaled_dot_product_attention(*t, mask=m)[0], q, k, v,
                       weight=weight))  # fmt: skip
    packed = np.stack([q, k, v])
    fast_packed = _grads(
        lambda t: FusedAttention.apply(t, mask=m, recompute=recompute), packed, weight=weight
    )
    np.testing.assert_allclose(fast_packed[0], fast[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fast_packed[1][0], np.stack(fast[1]), rtol=1e-12, atol=1e-14)
    check_function(FusedAttention, q, k, v, kwargs={"mask": m, "recompute": recompute})


def test_float32_stays_float32(rng):
    """No float64 constant or buffer promotes a float32 step: every output and gradient is
    float32 (a float64 temporary would double the memory traffic)."""
    f32 = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    x = Tensor(f32(2, 6, 8), requires_grad=True)
    params = [Tensor(f32(8, 8), requires_grad=True) for _ in range(3)]
    params += [Tensor(f32(8), requires_grad=True) for _ in range(3)]
    qkv = QKVProjection.apply(x, *params, num_heads=2, has_bias=True)
    att = FusedAttention.apply(qkv, mask=causal_mask(6), recompute=True)
    merged = att.permute(0, 2, 1, 3).reshape(2, 6, 8)
    gamma, beta = Tensor(f32(8), requires_grad=True), Tensor(f32(8), requires_grad=True)
    out = FusedGELU.apply(FusedLayerNorm.apply(merged, gamma, beta), recompute=True)
    assert all(t.data.dtype == np.float32 for t in (qkv, att, out))
    (out * Tensor(f32(2, 6, 8))).sum().backward()
    for t in (x, gamma, beta, *params):
        assert t.grad.dtype == np.float32, t.shape


def test_heads_come_back_in_merge_order(rng):
    """FusedAttention's (B, H, T, d) output and its packed gradient are stored (B, T, H, d) and
    (B, T, 3, H, d): merging the heads into (B, T, H·d), and QKVProjection's backward reading
    the packed gradient as (B·T, 3·H·d) rows, are reshapes without a copy."""
    qkv = rng.normal(size=(3, 2, 4, 5, 3)).astype(np.float32)  # (3, B, H, T, d)
    fn = FusedAttention()
    fn.needs_grad = (True,)
    out = fn.forward(qkv, mask=causal_mask(5))
    assert np.transpose(out, (0, 2, 1, 3)).flags.c_contiguous
    (packed,) = fn.backward(rng.normal(size=out.shape).astype(np.float32))
    assert packed.shape == qkv.shape
    assert np.transpose(packed, (1, 3, 0, 2, 4)).flags.c_contiguous
