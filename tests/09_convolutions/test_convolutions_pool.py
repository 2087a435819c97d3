"""MaxPool2d, AvgPool2d and Flatten against PyTorch and finite differences."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fdcheck import check_function

from tinytorch.core.spatial import (
    AvgPool2d,
    AvgPool2dFunction,
    Flatten,
    MaxPool2d,
    MaxPool2dFunction,
)
from tinytorch.core.tensor import Tensor, precision

# (N, C, H, W), kernel, stride (None: the kernel), padding
CASES = [
    ((2, 1, 8, 8), 2, None, 0),
    ((1, 3, 7, 9), (3, 2), (2, 1), (1, 1)),
    ((3, 2, 5, 6), 3, 2, 1),
    ((2, 4, 6, 5), (1, 3), (1, 2), (0, 1)),
]


def torch_pool(kind, x, kernel, stride, padding, grad):
    tx = torch.tensor(x, requires_grad=True)
    pool = F.max_pool2d if kind == "max" else F.avg_pool2d
    out = pool(tx, kernel, stride=stride, padding=padding)
    out.backward(torch.tensor(grad))
    return out.detach().numpy(), tx.grad.numpy()


@pytest.mark.parametrize("kind, layer", [("max", MaxPool2d), ("avg", AvgPool2d)])
@pytest.mark.parametrize("shape, kernel, stride, padding", CASES)
def test_pooling_matches_torch(kind, layer, shape, kernel, stride, padding):
    rng = np.random.default_rng(sum(shape))
    with precision(np.float64):
        x = Tensor(rng.standard_normal(shape), requires_grad=True)
        y = layer(kernel, stride=stride, padding=padding)(x)
        grad = rng.standard_normal(y.shape)
        y.backward(grad)
    want, gx = torch_pool(kind, x.data, kernel, stride, padding, grad)
    assert y.shape == want.shape
    np.testing.assert_allclose(y.data, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad, gx, rtol=1e-12, atol=1e-12)


def test_max_pool_gradient_goes_to_the_first_of_tied_maxima_like_torch():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = 1.0  # two winners in the first window
    t = Tensor(x, requires_grad=True)
    MaxPool2d(2)(t).sum().backward()
    _, want = torch_pool("max", x, 2, None, 0, np.ones((1, 1, 2, 2)))
    np.testing.assert_array_equal(t.grad, want)
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
        want = torch.flatten(torch.tensor(x.data), start, end)
        assert Flatten(start, end)(x).shape == tuple(want.shape)
    y = Flatten()(x)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    np.testing.assert_array_equal(x.grad, g.reshape(x.shape).astype(np.float32))
