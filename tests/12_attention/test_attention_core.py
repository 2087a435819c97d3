"""Scaled dot-product attention: gradients, PyTorch parity, masks, masked rows, errors."""

import numpy as np
import oracle
import pytest
from fdcheck import check_graph, wrong_values

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


def test_causal_and_padding_masks_are_float32():
    masks = {
        "causal_mask(4)": causal_mask(4),
        "causal_mask(2, past_len=3)": causal_mask(2, past_len=3),
        "padding_mask([3, 1], 4)": padding_mask([3, 1], 4),
    }
    wrong = [f"{call} is {mask.dtype}" for call, mask in masks.items() if mask.dtype != np.float32]
    assert not wrong, (
        f"{', '.join(wrong)}; the lesson asks for float32 masks: build them with "
        "dtype=np.float32 (np.ones gives float64)"
    )


def test_causal_and_padding_masks_have_the_documented_values():
    np.testing.assert_array_equal(causal_mask(4), np.triu(np.ones((4, 4)) * -np.inf, k=1))
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


def _nonzero(a) -> int:
    return int(np.count_nonzero(a))


def _not_finite(a) -> int:
    return int(np.size(a) - np.count_nonzero(np.isfinite(a)))


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
    dtypes = [out.dtype] + [t.grad.dtype for t in tensors]
    assert dtypes == [np.float32] * 4, "float32 inputs must give float32 outputs and gradients"
    got = [out.data] + [t.grad for t in tensors]
    names = ["the output", "the gradient of q", "the gradient of k", "the gradient of v"]
    for g, w, name in zip(got, want, names):
        referee = "torch's scaled_dot_product_attention"
        wrong_values(g, w, name, rtol=0.0, atol=2e-5, referee=referee)
    sums = weights.data.sum(-1)
    wrong_values(
        sums, np.ones_like(sums), "the sum of each row of the weights", 1e-5, 0.0, None, "1"
    )


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    rng = np.random.default_rng(4)
    q, k, v = (Tensor(a, requires_grad=True) for a in _qkv(rng, (2, 3, 4), (2, 5, 4)))
    mask = np.zeros((2, 3, 5), dtype=np.float32)
    mask[0, 1] = -np.inf  # query 1 of batch 0 may see nothing
    mask[1] = -np.inf  # batch 1 sees nothing at all
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    bad = _not_finite(out.data) + _not_finite(weights.data)
    assert bad == 0, f"{bad} values of the output and weights are nan or inf (0/0 of a masked row)"
    nonzero = _nonzero(out.data[0, 1]) + _nonzero(weights.data[0, 1]) + _nonzero(out.data[1])
    assert nonzero == 0, "a query that may see no key must get zero weights and a zero output"
    np.testing.assert_allclose(weights.data[0, [0, 2]].sum(-1), 1.0, rtol=1e-6)
    out.sum().backward()
    bad = sum(_not_finite(t.grad) for t in (q, k, v))
    assert bad == 0, f"{bad} gradient values of q, k and v are nan or inf"
    nonzero = _nonzero(q.grad[0, 1]) + _nonzero(k.grad[1]) + _nonzero(v.grad[1])
    assert nonzero == 0, "fully masked rows must pass no gradient back to q, k or v"


def test_weights_depend_on_keys_and_mask_blocks_exactly():
    rng = np.random.default_rng(5)
    q, k, v = _qkv(rng, (1, 4, 8), (1, 4, 8))
    _, before = scaled_dot_product_attention(q, k, v)
    k2 = k.copy()
    k2[0, 2] += 3.0 * q[0, 0]  # key 2 now matches query 0 much better
    _, after = scaled_dot_product_attention(q, k2, v)
    gain = float(after.data[0, 0, 2] - before.data[0, 0, 2])
    assert gain > 0.1, "a key that matches the query better must get more weight"
    _, causal = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    leaked = _nonzero(causal.data[0][np.triu_indices(4, 1)])
    assert leaked == 0, f"{leaked} weights above the diagonal are not zero under causal_mask"


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
        moved = not np.allclose(first.data[:, t + 1 :], second.data[:, t + 1 :])
        assert moved, f"changing positions {t + 1}.. left their own outputs unchanged"


def test_dtype_follows_inputs():
    rng = np.random.default_rng(7)
    q, k, v = (a.astype(np.float32) for a in _qkv(rng, (2, 3, 4), (2, 3, 4)))
    out, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(3))
    dtypes = (out.dtype, weights.dtype)
    assert dtypes == (np.float32, np.float32), "float32 inputs must give float32 out and weights"


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
