"""log_softmax checks its axis as module 02's softmax does: one line naming the valid range."""

import numpy as np
import pytest

from tinytorch.core.losses import log_softmax
from tinytorch.core.tensor import ShapeError, Tensor


@pytest.mark.parametrize("dim", [2, -3, 1.0, "1"])
def test_an_axis_out_of_range_names_the_valid_ones(dim):
    with pytest.raises(ShapeError, match=r"log_softmax: axis .* out of range .* 2 dimensions; "
                       r"use an axis in \[-2, 1\]"):  # fmt: skip
        log_softmax(Tensor(np.ones((2, 3))), dim=dim)


@pytest.mark.parametrize("dim", [0, 1, -1, -2, np.int64(1)])
def test_every_axis_in_range_sums_to_one_in_probability(dim):
    x = np.random.default_rng(0).normal(size=(2, 3))
    out = log_softmax(Tensor(x), dim=dim).data
    np.testing.assert_allclose(np.exp(out).sum(axis=int(dim)), 1.0, rtol=1e-6)


def test_a_scalar_is_one_value_along_its_only_axis():
    for dim in (0, -1):
        assert log_softmax(Tensor(2.0), dim=dim).data == 0.0
