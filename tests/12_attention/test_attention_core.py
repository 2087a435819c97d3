"""Scaled dot-product attention: gradients, PyTorch parity, masks, masked rows, errors."""

import numpy as np
import oracle
import pytest
from fdcheck import check_graph

from tinytorch.core.attention import (
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)
from tinytorch.core.tensor import Tensor


def _qkv(rng, shape_q, shape_k, dv=None):
    dv = shape_k[-1] if dv is None else dv
    return (
        rng.standard_normal(shape_q),
        rng.standard_normal(shape_k),
        rng.standard_normal((*shape_k[:-1], dv)),
    )


def test_causal_and_padding_masks_have_the_documented_values():
    np.testing.assert_array_equal(causal_mask(4), np.triu(np.ones((4, 4)) * -np.inf, k=1))
    assert causal_mask(4).dtype == np.float32
    # with 2 cached positions, new query i sits at position 2 + i
    want = np.array([[0, 0, 0, -np.inf], [0, 0, 0, 0]])
    np.testing.assert_array_equal(causal_mask(2, past_len=2), want)
    pad = padding_mask([3, 1], 4)
    assert pad.shape == (2, 1, 1, 4)
    np.testing.assert_array_equal(
        pad[:, 0, 0], [[0, 0, 0, -np.inf], [0, -np.inf, -np.inf, -np.inf]]
    )
    with pytest.raises(ValueError, match=r"\[0, 4\]"):
        padding_mask([5, 1], 4)


def _sdpa_output(mask):
    return lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask)[0]


@pytest.mark.parametrize("masking", ["none", "causal", "padding"])
def test_core_gradients_by_finite_differences(masking):
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, (2, 2, 5, 3), (2, 2, 5, 3), dv=4)
    mask = {"none": None, "causal": causal_mask(5), "padding": padding_mask([5, 2], 5)}[masking]
    check_graph(_sdpa_output(mask), q, k, v)


def test_core_gradients_across_lengths_and_of_the_weights():
    rng = np.random.default_rng(1)
    q, k, v = _qkv(rng, (2, 3, 3), (2, 6, 3), dv=2)  # 3 queries over 6 keys
    check_graph(_sdpa_output(padding_mask([6, 4], 6)[:, 0]), q, k, v)
    # the weights are in the graph too: a loss on them reaches q and k
    check_graph(lambda q, k: scaled_dot_product_attention(q, k, v)[1], q, k)


def test_core_gradient_through_the_engine():
    rng = np.random.default_rng(2)
    mask = causal_mask(4) + padding_mask([4, 3], 4)[:, 0]  # both at once, (2, 4, 4)

    def build(q, k, v):
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
        return out

    check_graph(build, *_qkv(rng, (2, 4, 3), (2, 4, 3)))


@pytest.mark.parametrize("masking", ["causal", "padding"])
def test_parity_with_torch_sdpa(masking):
    # torch.nn.functional.scaled_dot_product_attention's output and gradients, committed
    case = oracle.load(__file__).case(f"sdpa/{masking}")
    steps = case["q"].shape[2]
    mask = causal_mask(steps) if masking == "causal" else padding_mask([16, 9, 1, 12], steps)
    np.testing.assert_array_equal(mask, case["mask"])  # the mask torch was given
    tensors = [Tensor(case[name], requires_grad=True) for name in "qkv"]
    out, weights = scaled_dot_product_attention(*tensors, mask=mask)
    out.backward(case["upstream"])
    want = [case["out"], case["grad_q"], case["grad_k"], case["grad_v"]]
    assert out.dtype == np.float32 and all(t.grad.dtype == np.float32 for t in tensors)
    got = [out.data] + [t.grad for t in tensors]
    errors = [float(np.abs(g - w).max()) for g, w in zip(got, want)]
    assert max(errors) < 2e-5, errors
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-5)


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    rng = np.random.default_rng(4)
    q, k, v = (Tensor(a, requires_grad=True) for a in _qkv(rng, (2, 3, 4), (2, 5, 4)))
    mask = np.zeros((2, 3, 5), dtype=np.float32)
    mask[0, 1] = -np.inf  # query 1 of batch 0 may see nothing
    mask[1] = -np.inf  # batch 1 sees nothing at all
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert np.isfinite(out.data).all() and np.isfinite(weights.data).all()
    assert np.all(out.data[0, 1] == 0) and np.all(weights.data[0, 1] == 0)
    assert np.all(out.data[1] == 0)
    np.testing.assert_allclose(weights.data[0, [0, 2]].sum(-1), 1.0, rtol=1e-6)
    out.sum().backward()
    for t in (q, k, v):
        assert np.isfinite(t.grad).all()
    assert np.all(q.grad[0, 1] == 0) and np.all(k.grad[1] == 0) and np.all(v.grad[1] == 0)


def test_weights_depend_on_keys_and_mask_blocks_exactly():
    rng = np.random.default_rng(5)
    q, k, v = _qkv(rng, (1, 4, 8), (1, 4, 8))
    _, before = scaled_dot_product_attention(q, k, v)
    k2 = k.copy()
    k2[0, 2] += 3.0 * q[0, 0]  # key 2 now matches query 0 much better
    _, after = scaled_dot_product_attention(q, k2, v)
    assert after.data[0, 0, 2] > before.data[0, 0, 2] + 0.1
    _, causal = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    assert np.all(causal.data[0][np.triu_indices(4, 1)] == 0)


def test_causal_outputs_ignore_the_future():
    rng = np.random.default_rng(6)
    q, k, v = _qkv(rng, (2, 6, 4), (2, 6, 4))
    first, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(6))
    for t in range(5):
        q2, k2, v2 = q.copy(), k.copy(), v.copy()
        for a in (q2, k2, v2):
            a[:, t + 1 :] = rng.standard_normal(a[:, t + 1 :].shape)
        second, _ = scaled_dot_product_attention(q2, k2, v2, mask=causal_mask(6))
        np.testing.assert_array_equal(first.data[:, : t + 1], second.data[:, : t + 1])
        assert not np.allclose(first.data[:, t + 1 :], second.data[:, t + 1 :])


def test_dtype_follows_inputs():
    rng = np.random.default_rng(7)
    q, k, v = (a.astype(np.float32) for a in _qkv(rng, (2, 3, 4), (2, 3, 4)))
    out, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(3))
    assert out.dtype == np.float32 and weights.dtype == np.float32


def test_shape_and_mask_errors_are_one_clear_line():
    q = np.zeros((2, 3, 4))
    cases = [
        ((q, np.zeros((2, 3, 5)), np.zeros((2, 3, 5))), None, "last axis"),
        ((q, np.zeros((2, 3, 4)), np.zeros((2, 5, 4))), None, "same length"),
        ((q, q, q), np.zeros((4, 4)), r"\(4, 4\).*\(2, 3, 3\)"),
        ((np.zeros(4), q, q), None, r"\(\.\.\., T, D\)"),
    ]
    for (a, b, c), mask, pattern in cases:
        with pytest.raises(ValueError, match=pattern) as err:
            scaled_dot_product_attention(a, b, c, mask=mask)
        assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="np.where"):
        scaled_dot_product_attention(q, q, q, mask=np.ones((3, 3), dtype=bool))
