"""MaxPool2d, AvgPool2d and Flatten against PyTorch and finite differences.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m09_convolutions.py).
"""

import numpy as np
import oracle
import pytest
from fdcheck import check_function

from tinytorch.core.spatial import (
    AvgPool2d,
    AvgPool2dFunction,
    Flatten,
    MaxPool2d,
    MaxPool2dFunction,
)
from tinytorch.core.tensor import Tensor, precision

REF = oracle.load(__file__)
# (N, C, H, W), kernel, stride (None: the kernel), padding; the position names the committed case
CASES = [
    ((2, 1, 8, 8), 2, None, 0),
    ((1, 3, 7, 9), (3, 2), (2, 1), (1, 1)),
    ((3, 2, 5, 6), 3, 2, 1),
    ((2, 4, 6, 5), (1, 3), (1, 2), (0, 1)),
]
INDEXED = [(i, *case) for i, case in enumerate(CASES)]


@pytest.mark.parametrize("kind, layer", [("max", MaxPool2d), ("avg", AvgPool2d)])
@pytest.mark.parametrize("i, shape, kernel, stride, padding", INDEXED)
def test_pooling_matches_torch(kind, layer, i, shape, kernel, stride, padding):
    case = REF.case(f"pool/{kind}/{i}")  # F.max_pool2d / F.avg_pool2d and their backward
    with precision(np.float64):
        x = Tensor(case["x"], requires_grad=True)
        y = layer(kernel, stride=stride, padding=padding)(x)
        y.backward(case["grad"])
    assert x.shape == shape and y.shape == case["y"].shape
    np.testing.assert_allclose(y.data, case["y"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad, case["grad_x"], rtol=1e-12, atol=1e-12)


def test_max_pool_gradient_goes_to_the_first_of_tied_maxima_like_torch():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = 1.0  # two winners in the first window
    t = Tensor(x, requires_grad=True)
    MaxPool2d(2)(t).sum().backward()
    np.testing.assert_array_equal(REF["pool_ties/x"], x)
    np.testing.assert_array_equal(t.grad, REF["pool_ties/grad_x"])
    assert t.grad.sum() == 4


@pytest.mark.parametrize("fn", [MaxPool2dFunction, AvgPool2dFunction])
@pytest.mark.parametrize(
    "shape, kernel, stride, padding",
    [((2, 2, 5, 6), (2, 3), (2, 1), (1, 1)), ((1, 3, 4, 4), (2, 2), (2, 2), (0, 0))],
)
def test_pool_functions_match_finite_differences(fn, shape, kernel, stride, padding):
    x = np.random.default_rng(1).permutation(np.prod(shape)).reshape(shape) / 7.0  # no ties
    check_function(fn, x, kwargs={"kernel": kernel, "stride": stride, "padding": padding})


def test_stride_defaults_to_the_kernel():
    assert MaxPool2d(3).stride == (3, 3) and AvgPool2d((2, 4)).stride == (2, 4)
    assert MaxPool2d(3, stride=1).stride == (1, 1)


def test_flatten_matches_torch_and_passes_the_gradient_back():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((2, 3, 4, 5)), requires_grad=True)
    for start, end in ((1, -1), (0, 1), (2, 3), (1, 2)):
        want = REF[f"flatten/{start}/{end}/shape"]  # torch.flatten's result shape
        assert Flatten(start, end)(x).shape == tuple(int(n) for n in want)
    y = Flatten()(x)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    np.testing.assert_array_equal(x.grad, g.reshape(x.shape).astype(np.float32))
