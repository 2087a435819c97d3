"""Module 18's kernels: each equals the lesson it replaces and PyTorch, forward and every
gradient, and each backward matches central differences."""

import numpy as np
import oracle
import pytest
from fdcheck import check_function
from fdcheck import weighted_grads as _grads

from tinytorch.accel import blocking
from tinytorch.accel.kernels import (
    FusedAttention,
    FusedGELU,
    FusedLayerNorm,
    QKVProjection,
    softmax_rows_,
)
from tinytorch.core.activations import gelu, softmax
from tinytorch.core.attention import causal_mask, padding_mask, scaled_dot_product_attention
from tinytorch.core.tensor import Tensor
from tinytorch.nn import LayerNorm

# PyTorch's answers, committed by tests/torch_oracle/m18_acceleration.py
REF = oracle.load(__file__)


def test_softmax_in_place_equals_module_02_and_keeps_blocked_rows_zero(rng):
    scores = rng.normal(size=(3, 4, 6)) * 5
    want = softmax(Tensor(scores)).data
    buffer = scores.astype(np.float32)
    assert softmax_rows_(buffer) is buffer
    np.testing.assert_allclose(buffer, want, rtol=1e-5, atol=1e-7)
    blocked = np.full((2, 3), -np.inf)
    assert np.all(softmax_rows_(blocked) == 0)


def test_softmax_writes_each_rows_log_sum_exp_and_zero_for_a_blocked_row(rng):
    scores = rng.normal(size=(2, 3, 5)) * 5
    scores[1, 2] = -np.inf
    total = np.exp(scores).sum(axis=-1, keepdims=True)
    total[1, 2] = 1  # the blocked row's log-sum-exp is 0
    want = np.log(total)
    lse = np.full((2, 3, 1), np.nan)
    weights = softmax_rows_(scores.copy(), lse)
    np.testing.assert_allclose(lse, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.exp(scores - lse), weights, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("mask", ["causal", "padding", None])
def test_fused_attention_equals_the_lesson_and_torch(mask, recompute):
    torch_case = REF.case(f"attention/{mask or 'none'}")  # F.scaled_dot_product_attention
    q, k, v, weight = (torch_case[name] for name in ("q", "k", "v", "weight"))
    m = {"causal": causal_mask(5), "padding": padding_mask([5, 3], 5), None: None}[mask]
    fast, fast_g = _grads(
        lambda *t: FusedAttention.apply(*t, mask=m, recompute=recompute), q, k, v, weight=weight
    )
    lesson, lesson_g = _grads(
        lambda *t: scaled_dot_product_attention(*t, mask=m)[0], q, k, v, weight=weight
    )
    np.testing.assert_allclose(fast, lesson, rtol=1e-10, atol=1e-12)
    for a, b in zip(fast_g, lesson_g):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(fast, torch_case["out"], rtol=1e-9, atol=1e-11)
    for a, name in zip(fast_g, ("grad_q", "grad_k", "grad_v")):
        np.testing.assert_allclose(a, torch_case[name], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("recompute", [False, True])
def test_fused_attention_backward_matches_differences(rng, recompute):
    q, k, v = (rng.normal(size=(2, 4, 3)) for _ in range(3))
    check_function(FusedAttention, q, k, v, kwargs={"mask": causal_mask(4), "recompute": recompute})
    packed = np.stack([q, k, v])  # (3, ...): one input, one packed gradient
    check_function(FusedAttention, packed, kwargs={"mask": causal_mask(4)})


@pytest.mark.parametrize("recompute", [False, True])
def test_fused_attention_reports_its_weights_and_a_blocked_row_is_zero(rng, recompute):
    q = Tensor(rng.normal(size=(1, 3, 2)), requires_grad=True)
    seen = []
    kv, blocked = np.ones((1, 2, 2)), padding_mask([0], 2)[0]
    out = FusedAttention.apply(q, kv, kv, mask=blocked, on_weights=seen.append, recompute=recompute)
    out.sum().backward()
    assert np.all(seen[0] == 0) and np.all(out.data == 0) and np.all(q.grad == 0)


@pytest.mark.parametrize("n, bias", [(3, True), (1, True), (2, False)])
def test_packed_projection_matches_differences_and_the_lesson(rng, n, bias):
    x = rng.normal(size=(2, 3, 4))
    params = [rng.normal(size=(4, 4)) for _ in range(n)] + (
        [rng.normal(size=4) for _ in range(n)] if bias else []
    )
    check_function(QKVProjection, x, *params, kwargs={"num_heads": 2, "has_bias": bias})
    heads = QKVProjection.apply(Tensor(x), *params, num_heads=2, has_bias=bias).data
    heads = heads.reshape(n, 2, 2, 3, 2)
    for i in range(n):
        y = x @ params[i] + (params[n + i] if bias else 0)
        want = y.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(heads[i], want, rtol=1e-5, atol=1e-5)
        assert heads[i].flags.c_contiguous


def test_fused_layernorm_equals_the_lesson_torch_and_differences():
    torch_case = REF.case("layernorm")  # F.layer_norm(x, (8,), gamma, beta, eps=1e-5)
    x, gamma, beta, weight = (torch_case[name] for name in ("x", "gamma", "beta", "weight"))
    check_function(FusedLayerNorm, x, gamma, beta)
    fast, fast_g = _grads(lambda *t: FusedLayerNorm.apply(*t), x, gamma, beta, weight=weight)

    def lesson_fn(xt, g, b):
        ln = LayerNorm(8)
        ln.gamma, ln.beta = g, b
        return ln(xt)

    lesson, lesson_g = _grads(lesson_fn, x, gamma, beta, weight=weight)
    np.testing.assert_allclose(fast, lesson, rtol=1e-10, atol=1e-12)
    for a, b in zip(fast_g, lesson_g):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(fast, torch_case["out"], rtol=1e-9, atol=1e-11)
    for a, name in zip(fast_g, ("grad_x", "grad_gamma", "grad_beta")):
        np.testing.assert_allclose(a, torch_case[name], rtol=1e-8, atol=1e-10)


def test_fused_layernorm_keeps_x_itself_and_two_numbers_per_row(rng):
    x = rng.normal(size=(4, 6, 8)).astype(np.float32)
    fused = FusedLayerNorm()
    fused.needs_grad = (True, True, True)
    fused.forward(x, np.ones(8, np.float32), np.zeros(8, np.float32))
    kept = [a for a in vars(fused).values() if isinstance(a, np.ndarray)]
    assert any(np.shares_memory(a, x) for a in kept)  # x, not a copy
    others = [a for a in kept if not np.shares_memory(a, x)]
    assert sum(a.size for a in others) <= 2 * 24 + 8  # mean and rstd per row, gamma


def test_fused_layernorm_centres_in_float32_when_the_mean_dwarfs_the_spread(rng):
    x = (1000 + rng.normal(size=(3, 5, 16))).astype(np.float32)  # var = E[x²] - mean² would fail
    gamma, beta = rng.normal(size=16), rng.normal(size=16)
    grad = rng.normal(size=x.shape)
    fused = FusedLayerNorm()
    fused.needs_grad = (True, True, True)
    f32 = [a.astype(np.float32) for a in (gamma, beta, grad)]
    got = fused.forward(x, f32[0], f32[1])
    got_grads = fused.backward(f32[2])
    xc = x.astype(np.float64) - x.mean(axis=-1, keepdims=True, dtype=np.float64)
    rstd = 1 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + 1e-5)
    x_hat = xc * rstd
    g = grad * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    want_grads = (dx, (grad * x_hat).sum(axis=(0, 1)), grad.sum(axis=(0, 1)))
    assert got.dtype == np.float32 and all(a.dtype == np.float32 for a in got_grads)
    np.testing.assert_allclose(got, x_hat * gamma + beta, rtol=2e-3, atol=2e-3)
    for a, b in zip(got_grads, want_grads):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("recompute", [False, True])
def test_fused_gelu_equals_the_lesson_torch_and_differences(recompute):
    torch_case = REF.case("gelu")  # F.gelu(x, approximate="tanh")
    x, weight = torch_case["x"], torch_case["weight"]
    check_function(FusedGELU, x, kwargs={"recompute": recompute})
    fast, (dx,) = _grads(lambda t: FusedGELU.apply(t, recompute=recompute), x, weight=weight)
    lesson, (lesson_dx,) = _grads(gelu, x, weight=weight)
    np.testing.assert_allclose(fast, lesson, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dx, lesson_dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast, torch_case["out"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dx, torch_case["grad_x"], rtol=1e-10, atol=1e-12)


def test_recompute_keeps_less(rng):
    x = rng.normal(size=(4, 64)).astype(np.float32)
    kept, recomputed = FusedGELU(), FusedGELU()
    kept.forward(x)
    recomputed.forward(x, recompute=True)
    assert kept.t is not None and recomputed.t is None
    q = rng.normal(size=(2, 8, 4)).astype(np.float32)
    fused = FusedAttention()
    fused.needs_grad = (True, True, True)
    fused.forward(q, q, q, recompute=True)
    assert fused.weights is None and fused.lse.shape == (2, 8, 1)  # one number per row


def test_recomputed_weights_from_the_log_sum_exp_equal_the_kept_ones_in_float32(rng, monkeypatch):
    monkeypatch.setattr(blocking, "BLOCK", 2 * 6 * 6)  # several blocks of two heads each
    q, k, v = (rng.normal(size=(5, 6, 4)).astype(np.float32) * 3 for _ in range(3))
    mask = np.where(rng.random((5, 6, 6)) < 0.3, -np.inf, 0).astype(np.float32)
    mask[0, 2] = -np.inf  # a fully blocked row
    grad = rng.normal(size=(5, 6, 4)).astype(np.float32)
    runs = []
    for recompute in (False, True):
        fused = FusedAttention()
        fused.needs_grad = (True, True, True)
        out = fused.forward(q, k, v, mask=mask, recompute=recompute)
        runs.append((out, *fused.backward(grad)))
    for kept, recomputed in zip(*runs):
        assert recomputed.dtype == np.float32 and np.all(np.isfinite(recomputed))
        np.testing.assert_allclose(recomputed, kept, rtol=1e-5, atol=1e-5)


def test_sorted_embedding_lookup_equals_the_lesson_and_differences(rng):
    from tinytorch.accel.kernels import SortedEmbeddingLookup
    from tinytorch.core.embeddings import EmbeddingLookup

    weight = rng.normal(size=(7, 3))
    ids = rng.integers(0, 7, size=(4, 5))  # repeats, and rows never looked up
    weight_out = rng.normal(size=(4, 5, 3))
    fast, (fast_g,) = _grads(
        lambda w: SortedEmbeddingLookup.apply(w, ids=ids), weight, weight=weight_out
    )
    lesson, (lesson_g,) = _grads(
        lambda w: EmbeddingLookup.apply(w, ids=ids), weight, weight=weight_out
    )
    np.testing.assert_array_equal(fast, lesson)
    np.testing.assert_allclose(fast_g, lesson_g, rtol=1e-12, atol=1e-12)
    check_function(SortedEmbeddingLookup, weight, kwargs={"ids": ids})
    empty, (empty_g,) = _grads(
        lambda w: SortedEmbeddingLookup.apply(w, ids=np.zeros((0,), np.int64)),
        weight,
        weight=np.zeros((0, 3)),
    )
    assert empty.shape == (0, 3) and np.all(empty_g == 0)
