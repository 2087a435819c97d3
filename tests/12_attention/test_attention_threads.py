"""Attention on a packed batch with two BLAS threads allowed: two batch halves, same numbers."""

import numpy as np
import pytest
import threadpoolctl

from tinytorch.core import attention
from tinytorch.core.tensor import Tensor


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    batch, heads, steps, dim = 5, 2, 160, 8  # 5 * 2 * 160 * 160 scores: above the split size
    assert batch * heads * steps * steps >= attention.SPLIT_MIN_SCORES
    qkv = rng.standard_normal((3, batch, heads, steps, dim))
    upstream = rng.standard_normal((batch, heads, steps, dim))
    lengths = np.array([160, 7, 100, 160, 1])  # a per-row mask: split with its rows
    return qkv, upstream, attention.padding_mask(lengths, steps).astype(np.float64)


def _run(qkv, upstream, mask, threads):
    x = Tensor(qkv, requires_grad=True)
    kept = []
    with threadpoolctl.threadpool_limits(threads, user_api="blas"):
        out = attention.Attention.apply(x, mask=mask, weights_out=kept)
        split = out._ctx.halves is not None
        (out * Tensor(upstream)).sum().backward()
    return split, out.data, kept[0], x.grad


@pytest.mark.parametrize("per_row_mask", [True, False])
def test_two_threads_split_the_batch_and_match_one_thread(inputs, per_row_mask):
    qkv, upstream, mask = inputs
    mask = mask if per_row_mask else attention.causal_mask(qkv.shape[-2])
    split1, out1, w1, g1 = _run(qkv, upstream, mask, 1)
    split2, out2, w2, g2 = _run(qkv, upstream, mask, 2)
    assert not split1 and split2
    np.testing.assert_allclose(out2, out1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w2, w1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g2, g1, rtol=1e-12, atol=1e-12)
    assert g2.shape == qkv.shape


def test_small_batches_stay_one_node():
    qkv = Tensor(np.ones((3, 2, 1, 4, 8)), requires_grad=True)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        out = attention.Attention.apply(qkv)
    assert out._ctx.halves is None
