"""The fast Functions `accelerate` gives module 21's Llama (tinytorch/accel/llama.py): values
against the lesson's Functions, every backward against finite differences, and module 14's FLOP
rules for them and for the lesson's parts (a profiled Llama step has no operation without one)."""

import numpy as np
import pytest
from fdcheck import check_function

from tinytorch.accel.accelerate import accelerate
from tinytorch.accel.llama import (
    FusedRMSNorm,
    FusedRotary,
    GroupedAttention,
    RotaryProjection,
    SwiGLUGate,
    rotate_pairs_,
)
from tinytorch.core.attention import causal_mask, scaled_dot_product_attention
from tinytorch.core.hooks import listen
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor, precision
from tinytorch.models.llama import Llama
from tinytorch.nn.llama import RMSNormFunction, RotaryFunction, SiLUFunction, rotary_angles
from tinytorch.profile.flops import backward_flops, forward_flops
from tinytorch.profile.profiler import Profiler
from tinytorch.profile.rules import MATMUL_OPS

RNG = np.random.default_rng(11)


def run(fn_cls, *arrays, **kwargs):
    """One forward outside the engine (no gradient wanted)."""
    fn = fn_cls()
    fn.needs_grad = (False,) * len(arrays)
    return fn.forward(*arrays, **kwargs)


def angles(start, steps, dim=8):
    a = rotary_angles(dim, np.arange(start, start + steps))
    return np.cos(a), np.sin(a)


def test_fused_rmsnorm_matches_the_lesson_and_its_backward_the_differences():
    x, w = RNG.normal(0, 3, (2, 5, 12)), RNG.normal(1, 0.3, 12)
    np.testing.assert_allclose(
        run(FusedRMSNorm, x, w, eps=1e-5), run(RMSNormFunction, x, w, eps=1e-5)
    )
    check_function(FusedRMSNorm, x, w, kwargs={"eps": 1e-5})
    check_function(FusedRMSNorm, x, w, wrt=[0])  # x's gradient alone
    check_function(FusedRMSNorm, x * 1e-3, w, kwargs={"eps": 1e-6})  # eps matters here


@pytest.mark.parametrize("start", [0, 9])
def test_fused_rotary_matches_the_lesson_and_turns_the_gradient_back(start):
    x = RNG.normal(size=(2, 3, 6, 8))
    cos, sin = angles(start, 6)
    want = run(RotaryFunction, x, cos, sin)
    np.testing.assert_allclose(run(FusedRotary, x, cos=cos, sin=sin), want, atol=1e-12)
    check_function(FusedRotary, x, kwargs={"cos": cos, "sin": sin})
    fn = FusedRotary()
    fn.needs_grad = (True,)
    turned = fn.forward(x, cos=cos, sin=sin)
    np.testing.assert_allclose(fn.backward(turned)[0], x, atol=1e-12)  # a rotation: the inverse


@pytest.mark.parametrize(
    ("dtype", "atol"), [(np.float64, 1e-12), (np.float32, 1e-5), (np.float16, 1e-2)]
)
def test_pairs_turn_in_place_as_complex_products_or_pair_by_pair(dtype, atol):
    x = RNG.normal(size=(3, 6, 8))
    cos, sin = angles(2, 6)
    want = run(RotaryFunction, x, cos, sin)
    a = x.astype(dtype)  # float16 has no complex type: the pair-by-pair path
    got = rotate_pairs_(a, cos.astype(dtype), sin.astype(dtype))
    assert got is a and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    back = rotate_pairs_(a, cos.astype(dtype), -sin.astype(dtype))  # the inverse turn
    np.testing.assert_allclose(back, x, rtol=0, atol=atol)


@pytest.mark.parametrize("start", [0, 5])
def test_the_rotary_projection_turns_q_and_k_and_leaves_v(start):
    x, cos, sin = RNG.normal(size=(2, 4, 16)), *angles(start, 4)
    wq, wk, wv = (RNG.normal(size=(16, n)) for n in (16, 8, 8))
    q = run(RotaryProjection, x, wq, num_heads=2, cos=cos, sin=sin)  # (B, H, T, D)
    kv = run(RotaryProjection, x, wk, wv, num_heads=1, cos=cos, sin=sin)  # (2, B, 1, T, D)
    heads = (x @ wq).reshape(2, 4, 2, 8).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(q, run(RotaryFunction, heads, cos, sin), atol=1e-12)
    k_heads, v_heads = ((x @ w).reshape(2, 4, 1, 8).transpose(0, 2, 1, 3) for w in (wk, wv))
    np.testing.assert_allclose(kv[0], run(RotaryFunction, k_heads, cos, sin), atol=1e-12)
    np.testing.assert_allclose(kv[1], v_heads, atol=1e-12)
    check_function(RotaryProjection, x, wq, kwargs=dict(num_heads=2, cos=cos, sin=sin))
    check_function(RotaryProjection, x, wk, wv, kwargs=dict(num_heads=1, cos=cos, sin=sin))
    check_function(RotaryProjection, x, wk, wv, wrt=[1], kwargs=dict(num_heads=1, cos=cos, sin=sin))


def lesson_attention(q, k, v, mask):
    """Module 21's grouped attention on arrays: (B, H, T, D), (B, H_kv, T_k, D) -> (B, T, H*D)."""
    b, h, t, d = q.shape
    kv, tk = k.shape[1], k.shape[2]
    with precision(np.float64):
        out, _ = scaled_dot_product_attention(
            Tensor(q.reshape(b, kv, h // kv, t, d)), Tensor(k.reshape(b, kv, 1, tk, d)),
            Tensor(v.reshape(b, kv, 1, tk, d)), None if mask is None else Tensor(mask),
        )  # fmt: skip
    return out.data.reshape(b, h, t, d).transpose(0, 2, 1, 3).reshape(b, t, h * d)


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_grouped_attention_matches_the_lessons_and_its_backward_the_differences(kv_heads):
    q, kv = RNG.normal(size=(2, 4, 5, 6)), RNG.normal(size=(2, 2, kv_heads, 5, 6))
    mask = causal_mask(5).astype(np.float64)
    want = lesson_attention(q, kv[0], kv[1], mask)
    np.testing.assert_allclose(run(GroupedAttention, q, kv, mask=mask), want, atol=1e-12)
    check_function(GroupedAttention, q, kv, kwargs={"mask": mask})
    check_function(GroupedAttention, q, kv, wrt=[0], kwargs={"mask": mask})
    check_function(GroupedAttention, q, kv, kwargs={"mask": mask, "recompute": True})


def test_grouped_attention_with_cached_keys_continues_the_positions():
    q, k, v = RNG.normal(size=(1, 4, 3, 6)), *RNG.normal(size=(2, 1, 2, 7, 6))
    mask = causal_mask(3, past_len=4).astype(np.float64)  # 4 cached positions, 3 new
    got = run(GroupedAttention, q, k, v, mask=mask)
    np.testing.assert_allclose(got, lesson_attention(q, k, v, mask), atol=1e-12)
    check_function(GroupedAttention, q, k, v, kwargs={"mask": mask})
    one = run(GroupedAttention, q[:, :, -1:], k, v)  # one new position: no mask
    np.testing.assert_allclose(one, lesson_attention(q[:, :, -1:], k, v, None), atol=1e-12)


def test_the_swiglu_gate_is_silu_times_the_value_even_far_out():
    a = np.concatenate([RNG.normal(0, 2, 30), [-120.0, -30.0, 30.0, 120.0]]).reshape(2, 17)
    b = RNG.normal(size=(2, 17))
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no warning on the way
        got = run(SwiGLUGate, a.astype(np.float32), b.astype(np.float32))
    want = run(SiLUFunction, a) * b
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    check_function(SwiGLUGate, a[:, :13], b[:, :13])  # the finite range: 6 sigma of N(0, 2)
    check_function(SwiGLUGate, a, b, wrt=[1])


def small_llama(seed=0):
    np.random.seed(seed)
    return Llama(vocab_size=23, embed_dim=16, num_layers=2, num_heads=4, num_kv_heads=2,
                 max_seq_len=10, multiple_of=16)  # fmt: skip


def profiled_step(model):
    tokens = np.random.default_rng(2).integers(0, 23, size=(2, 10))
    profiler = Profiler(model)
    with listen(profiler):
        cross_entropy(model(tokens), tokens).backward()
    return profiler.events


@pytest.mark.parametrize("fast", [False, True], ids=["lesson", "accelerated"])
def test_every_operation_of_a_llama_step_has_a_flop_rule(fast):
    model = accelerate(small_llama(), workers=1) if fast else small_llama()
    events = profiled_step(model)
    ops = {e.op for e in events}
    want = {"GroupedAttention", "RotaryProjection", "FusedRMSNorm", "SwiGLUGate"} if fast else {
        "RMSNormFunction", "RotaryFunction", "SiLUFunction"}  # fmt: skip
    assert want <= ops
    assert [(e.op, e.phase) for e in events if e.other_flops is None] == []


def test_the_accelerated_step_multiplies_what_the_lessons_step_multiplies():
    lesson, fast = profiled_step(small_llama()), profiled_step(accelerate(small_llama(), workers=1))
    for phase in ("forward", "backward"):
        counts = [
            sum(e.matmul_flops for e in events if e.phase == phase) for events in (lesson, fast)
        ]
        assert counts[0] == counts[1] > 0, phase
    assert {"GroupedAttention", "RotaryProjection"} <= set(MATMUL_OPS)  # a profile's matmul kind


def test_the_llama_rules_count_from_shapes():
    x = (2, 5, 12)
    assert forward_flops("RMSNormFunction", [x, (12,)], x) == (0, 4 * 120)
    assert backward_flops("FusedRMSNorm", [x, (12,)], x, [True, True]) == (0, 9 * 120)
    assert forward_flops("FusedRotary", [x], x) == forward_flops("RotaryFunction", [x], x)
    assert forward_flops("SiLUFunction", [x], x) == (0, 4 * 120)
    gate = forward_flops("SwiGLUGate", [x, x], x)  # the lesson's SiLU and product
    assert gate == (
        0,
        forward_flops("SiLUFunction", [x], x)[1] + forward_flops("Mul", [x, x], x)[1],
    )
    assert backward_flops("SwiGLUGate", [x, x], x, [False, True]) == (0, 2 * 120)
    # q of 2 heads from (2, 5, 12): one (10, 12) @ (12, 8) product, its 80 values turned
    q_shape = (2, 2, 5, 4)
    assert forward_flops("RotaryProjection", [x, (12, 8)], q_shape) == (2 * 10 * 12 * 8, 3 * 80)
    back = backward_flops("RotaryProjection", [x, (12, 4), (12, 4)], (2, 2, 1, 5, 4), [1, 1, 1])
    # dx: two products and their sum; dW_k, dW_v: two more; k's 40 values turned back
    assert back == (4 * 2 * 10 * 12 * 4, 10 * 12 + 3 * 40)
    grouped = [(2, 4, 5, 6), (2, 2, 1, 7, 6)]  # 4 query heads on one kv head, 7 keys
    fused = [(2, 1, 20, 6), (2, 1, 7, 6), (2, 1, 7, 6)]
    assert forward_flops("GroupedAttention", grouped, (2, 5, 24)) == forward_flops(
        "FusedAttention", fused, (2, 1, 20, 6)
    )
    assert backward_flops("GroupedAttention", grouped, (2, 5, 24), [1, 0]) == backward_flops(
        "FusedAttention", fused, (2, 1, 20, 6), [1, 0, 0]
    )
