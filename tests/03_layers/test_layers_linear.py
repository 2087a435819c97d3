"""Linear: the fused matmul + bias function against finite differences and PyTorch.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m03_layers.py).
"""

import numpy as np
import oracle
import pytest
from fdcheck import check_function
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.core.layers import Linear, LinearFunction
from tinytorch.core.tensor import ShapeError, Tensor

REF = oracle.load(__file__)
lead_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=15, deadline=None)
@given(lead=lead_shapes, n_in=st.integers(1, 4), n_out=st.integers(1, 4), bias=st.booleans())
def test_linear_function_matches_finite_differences(lead, n_in, n_out, bias):
    rng = np.random.default_rng(len(lead) * 100 + n_in * 10 + n_out)
    arrays = [rng.standard_normal((*lead, n_in)), rng.standard_normal((n_in, n_out))]
    if bias:
        arrays.append(rng.standard_normal(n_out))
    check_function(LinearFunction, *arrays)


def test_linear_function_only_weight_gradient():
    rng = np.random.default_rng(3)
    check_function(
        LinearFunction,
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((4, 2)),
        rng.standard_normal(2),
        wrt=[1],
    )


def _run(x, w, b, grad):
    fn = LinearFunction()
    fn.needs_grad = (True, True, True)
    out = fn.forward(x, w, b)
    return out, fn.backward(grad)


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 7), (2, 2, 3, 7), (7,)])
def test_linear_matches_torch(shape):
    case = REF.case(f"linear/{'x'.join(map(str, shape))}")  # torch.nn.functional.linear
    out, (gx, gw, gb) = _run(case["x"], case["w"], case["b"], case["g"])
    assert out.dtype == np.float32 and out.shape == case["out"].shape
    np.testing.assert_allclose(out, case["out"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gx, case["grad_x"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw, case["grad_w"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb, case["grad_b"], rtol=1e-5, atol=1e-5)


def test_linear_layer_matches_torch_module_with_copied_weights():
    case = REF.case("module")  # a torch.nn.Linear(6, 3) holding these weights
    layer = Linear(6, 3)
    layer.weight.data[...], layer.bias.data[...] = case["weight"], case["bias"]
    got = layer(Tensor(case["x"]))
    assert isinstance(got, Tensor) and got.dtype == np.float32
    np.testing.assert_allclose(got.data, case["out"], rtol=1e-5, atol=1e-6)


def test_linear_without_bias():
    np.random.seed(0)
    layer = Linear(3, 2, bias=False)
    assert layer.bias is None and layer.parameters() == [layer.weight]
    x = np.random.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(layer(x).data, x @ layer.weight.data, rtol=1e-6)


def test_linear_records_graph_only_when_asked():
    layer = Linear(3, 2)
    y = layer(Tensor(np.ones((1, 3))))
    assert y.requires_grad and isinstance(y._ctx, LinearFunction)
    layer.weight.requires_grad = layer.bias.requires_grad = False
    assert layer(np.ones((1, 3))).requires_grad is False


def test_linear_init_follows_pytorch_rule():
    np.random.seed(0)
    layer = Linear(400, 300)
    bound = 1 / np.sqrt(400)
    for p, shape in ((layer.weight, (400, 300)), (layer.bias, (300,))):
        assert p.shape == shape and p.dtype == np.float32 and p.requires_grad
        assert np.abs(p.data).max() <= bound
        # uniform on [-bound, bound]: fills the range, mean about 0, variance bound^2 / 3
        assert np.abs(p.data).max() > 0.98 * bound
    np.testing.assert_allclose(layer.weight.data.var(), bound**2 / 3, rtol=0.05)
    assert abs(layer.weight.data.mean()) < 0.02 * bound


def test_linear_init_is_reproducible_from_numpy_seed():
    np.random.seed(7)
    a = Linear(5, 4)
    np.random.seed(7)
    b = Linear(5, 4)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    np.testing.assert_array_equal(a.bias.data, b.bias.data)


def test_linear_wrong_last_dim_names_shapes():
    layer = Linear(4, 2)
    with pytest.raises(ShapeError, match=r"Linear\(4, 2\).*\(3, 5\).*must be 4"):
        layer(np.ones((3, 5)))
    with pytest.raises(ShapeError, match=r"shape \(\)"):
        layer(np.float32(1.0))


@pytest.mark.parametrize("args", [(0, 3), (3, -1), (2.5, 3), (True, 2)])
def test_linear_rejects_bad_sizes(args):
    with pytest.raises(ValueError, match="positive integer"):
        Linear(*args)
