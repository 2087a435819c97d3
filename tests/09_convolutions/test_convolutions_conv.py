"""Conv2d: values and gradients against torch.nn.functional.conv2d and finite differences.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m09_convolutions.py).
"""

import numpy as np
import oracle
import pytest
from fdcheck import check_function, check_graph

from tinytorch.core.spatial import Conv2d, Conv2dFunction, col2im, im2col
from tinytorch.core.tensor import Tensor, precision

REF = oracle.load(__file__)
# (N, C, H, W), out channels, kernel, stride, padding, bias
CASES = [
    ((2, 1, 8, 8), 4, (3, 3), (1, 1), (0, 0), True),
    ((3, 3, 7, 5), 2, (3, 2), (2, 1), (1, 0), True),
    ((1, 2, 6, 9), 5, (1, 4), (1, 3), (0, 2), False),
    ((2, 4, 5, 5), 3, (5, 5), (2, 2), (2, 2), True),
    ((4, 1, 9, 6), 1, (2, 3), (3, 2), (1, 1), False),
]
INDEXED = [(i, *case) for i, case in enumerate(CASES)]  # the position names the committed case


@pytest.mark.parametrize("i, shape, out, kernel, stride, padding, bias", INDEXED)
def test_layer_matches_torch_values_and_every_gradient(
    i, shape, out, kernel, stride, padding, bias
):
    case = REF.case(f"conv/{i}")  # F.conv2d with these weights, and its backward of `grad`
    with precision(np.float64):
        layer = Conv2d(shape[1], out, kernel, stride=stride, padding=padding, bias=bias)
        layer.weight.data = case["w"].copy()
        if bias:
            layer.bias.data = case["b"].copy()
        x = Tensor(case["x"], requires_grad=True)
        y = layer(x)
        y.backward(case["grad"])
    assert y.shape == case["y"].shape
    np.testing.assert_allclose(y.data, case["y"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(x.grad, case["grad_x"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer.weight.grad, case["grad_w"], rtol=1e-10, atol=1e-12)
    if bias:
        np.testing.assert_allclose(layer.bias.grad, case["grad_b"], rtol=1e-10, atol=1e-12)
    else:
        assert layer.bias is None and len(layer.parameters()) == 1


def test_float32_forward_matches_torch():
    case = REF.case("conv_float32")
    layer = Conv2d(3, 8, 3, padding=1)
    assert layer.weight.dtype == np.float32
    layer.weight.data[...], layer.bias.data[...] = case["w"], case["b"]
    y = layer(case["x"])
    assert y.dtype == np.float32 and layer.weight.dtype == np.float32
    np.testing.assert_allclose(y.data, case["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, out, kernel, stride, padding, bias", CASES[:4])
def test_function_matches_finite_differences(shape, out, kernel, stride, padding, bias):
    rng = np.random.default_rng(out)
    arrays = [rng.standard_normal(shape), rng.standard_normal((out, shape[1], *kernel))]
    if bias:
        arrays.append(rng.standard_normal(out))
    check_function(Conv2dFunction, *arrays, kwargs={"stride": stride, "padding": padding})


def _kept_arrays(fn) -> list[tuple[str, np.ndarray]]:
    """(attribute, array) for each array a Function saved on itself, in tuples and lists too."""
    kept = []
    for name, value in vars(fn).items():
        items = value if isinstance(value, (tuple, list)) else [value]
        kept += [(name, a) for a in items if isinstance(a, np.ndarray)]
    return kept


def test_only_the_weight_gradient_is_computed_when_only_it_is_needed():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    check_function(Conv2dFunction, x, w, kwargs={"stride": (1, 1), "padding": (1, 1)}, wrt=[1])
    fn = Conv2dFunction()
    fn.needs_grad = (False, True)
    out = fn.forward(x, w, stride=(1, 1), padding=(1, 1))
    holding = [name for name, a in _kept_arrays(fn) if np.shares_memory(a, w)]
    assert not holding, (
        f"Conv2dFunction.forward kept the weight (as self.{holding[0]}) although only the weight "
        "needs a gradient; save it only when the input needs one (needs_grad[0])"
    )
    gx, gw = fn.backward(np.ones_like(out))
    assert gx is None and gw.shape == w.shape


def test_only_the_input_gradient_keeps_no_im2col_matrix():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    fn = Conv2dFunction()
    fn.needs_grad = (True, False)
    out = fn.forward(x, w, stride=(1, 1), padding=(1, 1))
    cols = im2col(x, (3, 3), (1, 1), (1, 1)).size  # 50 rows of 18: larger than x and w together
    large = [name for name, a in _kept_arrays(fn) if a.size >= cols]
    assert not large, (
        f"Conv2dFunction.forward kept an im2col-sized array (self.{large[0]}) although the weight "
        "needs no gradient; save cols only when the weight needs one (needs_grad[1])"
    )
    gx, gw = fn.backward(np.ones_like(out))
    assert gx.shape == x.shape and gw is None


def test_stacked_layers_through_the_engine_match_finite_differences():
    rng = np.random.default_rng(7)
    np.random.seed(7)
    with precision(np.float64):
        first, second = Conv2d(2, 3, 3, padding=1), Conv2d(3, 2, 2, stride=2)
    wa, wb = first.weight.data, second.weight.data

    def build(x, w1, w2):
        h = Conv2dFunction.apply(x, w1, stride=(1, 1), padding=(1, 1))
        return Conv2dFunction.apply(h * h, w2, stride=(2, 2), padding=(0, 0))

    check_graph(build, rng.standard_normal((2, 2, 6, 4)), wa, wb)


def test_im2col_rows_are_the_windows_and_col2im_is_its_adjoint():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 7))
    kernel, stride, padding = (3, 2), (2, 3), (1, 2)
    cols = im2col(x, kernel, stride, padding)
    unfolded = REF["unfold/unfolded"]  # torch's F.unfold of the same x: (N, C*kh*kw, L)
    np.testing.assert_array_equal(x, REF["unfold/x"])
    np.testing.assert_array_equal(cols, unfolded.transpose(0, 2, 1).reshape(-1, cols.shape[1]))
    g = rng.standard_normal(cols.shape)
    # <im2col(x), g> == <x, col2im(g)> for every x: col2im is the transpose of im2col
    np.testing.assert_allclose(
        np.sum(cols * g), np.sum(x * col2im(g, x.shape, kernel, stride, padding))
    )


def test_initialisation_follows_pytorch_bounds_and_seed():
    np.random.seed(0)
    a = Conv2d(3, 16, (5, 3))
    np.random.seed(0)
    b = Conv2d(3, 16, (5, 3))
    bound = 1 / np.sqrt(3 * 5 * 3)
    assert a.weight.shape == (16, 3, 5, 3) and a.bias.shape == (16,)
    assert np.abs(a.weight.data).max() <= bound and np.abs(a.weight.data).max() > 0.9 * bound
    assert np.abs(a.bias.data).max() <= bound
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert [n for n, _ in a.named_parameters()] == ["weight", "bias"]
