"""Issue 38: softmax takes PyTorch's dim= as well as numpy's axis= (F.log_softmax does too)."""

import numpy as np
import pytest
from fdcheck import wrong_output

from tinytorch.core.activations import Softmax, SoftmaxFunction, softmax

X = np.random.default_rng(1).normal(size=(3, 4))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_by_dim_and_by_axis_are_the_same(axis):
    by_dim, by_axis = softmax(X, dim=axis).data, softmax(X, axis=axis).data
    np.testing.assert_array_equal(by_dim, by_axis)
    sums = by_dim.sum(axis=axis)  # each slice along the axis sums to 1: the forward's own check
    wrong_output(sums, np.ones_like(sums), SoftmaxFunction, rtol=1e-6, atol=1e-7, referee="1")
    np.testing.assert_array_equal(softmax(X, axis).data, by_dim)  # positional, as in PyTorch
    np.testing.assert_array_equal(Softmax(dim=axis)(X).data, Softmax(axis=axis)(X).data)


def test_the_default_is_the_last_axis_and_two_that_disagree_are_refused():
    np.testing.assert_array_equal(softmax(X).data, softmax(X, axis=-1).data)
    assert Softmax().axis == -1
    with pytest.raises(ValueError, match="dim=0 and axis=1 disagree"):
        softmax(X, dim=0, axis=1)
    with pytest.raises(ValueError, match="Softmax: dim=1 and axis=0 disagree"):
        Softmax(dim=1, axis=0)
