"""gelu on a large input with two BLAS threads allowed: both halves at once, the same numbers."""

import numpy as np
import pytest
import threadpoolctl

from tinytorch.core import activations
from tinytorch.core.tensor import Tensor


@pytest.fixture(scope="module")
def large():
    rng = np.random.default_rng(0)
    side = int(np.sqrt(activations.SPLIT_MIN_SIZE))
    x = rng.standard_normal((side, side + 1)).astype(np.float32)  # odd size: unequal halves
    return x, rng.standard_normal(x.shape).astype(np.float32)


def _gelu_and_grad(x, upstream, threads):
    t = Tensor(x, requires_grad=True)
    with threadpoolctl.threadpool_limits(threads, user_api="blas"):
        y = activations.gelu(t)
        kind = type(y._ctx)  # the backward frees the graph
        (y * Tensor(upstream)).sum().backward()
    return kind, y.data, t.grad


def test_large_gelu_splits_with_two_threads_and_matches_one_thread(large):
    x, upstream = large
    kind1, y1, g1 = _gelu_and_grad(x, upstream, 1)
    kind2, y2, g2 = _gelu_and_grad(x, upstream, 2)
    assert kind1 is activations.GELUFunction
    assert kind2 is activations.InHalves
    assert y2.dtype == np.float32 and g2.dtype == np.float32
    np.testing.assert_array_equal(y2, y1)
    np.testing.assert_array_equal(g2, g1)


def test_small_gelu_stays_one_node():
    x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        assert type(activations.gelu(x)._ctx) is activations.GELUFunction
