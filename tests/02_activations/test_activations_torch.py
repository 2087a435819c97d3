"""Forward values and backward outputs against PyTorch, float32, several shapes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tinytorch.core.activations import (
    GELU,
    GELUFunction,
    ReLU,
    ReLUFunction,
    Sigmoid,
    SigmoidFunction,
    Softmax,
    SoftmaxFunction,
    Tanh,
    TanhFunction,
    gelu,
    relu,
    sigmoid,
    softmax,
    tanh,
)
from tinytorch.core.tensor import Tensor

CASES = [
    (ReLUFunction, {}, torch.relu),
    (SigmoidFunction, {}, torch.sigmoid),
    (TanhFunction, {}, torch.tanh),
    (GELUFunction, {}, lambda t: F.gelu(t, approximate="tanh")),
    (SoftmaxFunction, {"axis": -1}, lambda t: torch.softmax(t, dim=-1)),
    (SoftmaxFunction, {"axis": 0}, lambda t: torch.softmax(t, dim=0)),
    (SoftmaxFunction, {"axis": 1}, lambda t: torch.softmax(t, dim=1)),
]


@pytest.mark.parametrize("fn_cls, kwargs, ref", CASES)
@pytest.mark.parametrize("shape", [(7,), (4, 9), (2, 3, 5)])
def test_forward_and_backward_match_torch(fn_cls, kwargs, ref, shape):
    if kwargs.get("axis", 0) >= len(shape):
        shape = (*shape, 3)
    rng = np.random.default_rng(sum(shape))
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    fn = fn_cls()
    fn.needs_grad = (True,)
    out = fn.forward(x, **kwargs)
    (gx,) = fn.backward(g)

    tx = torch.tensor(x, requires_grad=True)
    want = ref(tx)
    want.backward(torch.tensor(g))
    assert out.dtype == np.float32 and gx.dtype == np.float32
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "func, layer, ref",
    [
        (relu, ReLU(), torch.relu),
        (sigmoid, Sigmoid(), torch.sigmoid),
        (tanh, Tanh(), torch.tanh),
        (gelu, GELU(), lambda t: F.gelu(t, approximate="tanh")),
        (softmax, Softmax(), lambda t: torch.softmax(t, dim=-1)),
    ],
)
def test_functions_and_layers_return_tensors(func, layer, ref):
    x = np.random.default_rng(1).standard_normal((3, 6)).astype(np.float32)
    want = ref(torch.tensor(x)).numpy()
    for got in (func(x), func(Tensor(x)), layer(Tensor(x)), layer.forward(x)):
        assert isinstance(got, Tensor) and got.dtype == np.float32 and got.shape == x.shape
        np.testing.assert_allclose(got.data, want, rtol=1e-5, atol=1e-6)
    assert layer.parameters() == []


def test_gelu_is_the_tanh_form_not_the_exact_one():
    x = np.linspace(-4, 4, 101).astype(np.float32)
    got = gelu(x).data
    tanh_form = F.gelu(torch.tensor(x), approximate="tanh").numpy()
    exact = F.gelu(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, tanh_form, rtol=1e-5, atol=1e-6)
    assert np.abs(got - exact).max() > 1e-4  # the two forms differ measurably


def test_softmax_axis_argument_on_layer_and_function():
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    for axis in (0, 1, -1, -2):
        want = torch.softmax(torch.tensor(x), dim=axis).numpy()
        np.testing.assert_allclose(softmax(x, axis=axis).data, want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(Softmax(axis=axis)(x).data, want, rtol=1e-5, atol=1e-7)


def test_activation_records_graph_only_when_asked():
    x = Tensor(np.ones(3), requires_grad=True)
    assert isinstance(gelu(x)._ctx, GELUFunction)
    assert softmax(np.ones(3))._ctx is None
