"""Forward values and backward outputs against PyTorch, float32, several shapes.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m02_activations.py).
"""

import numpy as np
import oracle
import pytest
from fdcheck import wrong_output, wrong_values

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

REF = oracle.load(__file__)
CASES = [
    (ReLUFunction, {}, "relu"),
    (SigmoidFunction, {}, "sigmoid"),
    (TanhFunction, {}, "tanh"),
    (GELUFunction, {}, "gelu"),  # the tanh form
    (SoftmaxFunction, {"axis": -1}, "softmax-1"),
    (SoftmaxFunction, {"axis": 0}, "softmax0"),
    (SoftmaxFunction, {"axis": 1}, "softmax1"),
]


@pytest.mark.parametrize("fn_cls, kwargs, ref", CASES)
@pytest.mark.parametrize("shape", [(7,), (4, 9), (2, 3, 5)])
def test_forward_and_backward_match_torch(fn_cls, kwargs, ref, shape):
    if kwargs.get("axis", 0) >= len(shape):
        shape = (*shape, 3)
    case = REF.case(f"{ref}/{'x'.join(map(str, shape))}")
    x, g = case["x"], case["g"]
    fn = fn_cls()
    fn.needs_grad = (True,)
    out = fn.forward(x, **kwargs)
    (gx,) = fn.backward(g)
    assert out.dtype == np.float32 and gx.dtype == np.float32
    # each names the method it compared (tito's report points there), the forward first
    wrong_output(out, case["out"], fn_cls, 1e-5, 1e-6, "PyTorch's output")
    what = f"{fn_cls.__name__}.backward: the input gradient"
    wrong_values(gx, case["grad"], what, 1e-4, 1e-6, fn_cls.backward, "PyTorch's gradient")


@pytest.mark.parametrize(
    "func, layer, fn_cls, ref",
    [
        (relu, ReLU(), ReLUFunction, "relu"),
        (sigmoid, Sigmoid(), SigmoidFunction, "sigmoid"),
        (tanh, Tanh(), TanhFunction, "tanh"),
        (gelu, GELU(), GELUFunction, "gelu"),
        (softmax, Softmax(), SoftmaxFunction, "softmax"),
    ],
)
def test_functions_and_layers_return_tensors(func, layer, fn_cls, ref):
    case = REF.case(f"{ref}/layer")
    x, want = case["x"], case["out"]
    for got in (func(x), func(Tensor(x)), layer(Tensor(x)), layer.forward(x)):
        assert isinstance(got, Tensor) and got.dtype == np.float32 and got.shape == x.shape
        wrong_output(got.data, want, fn_cls, 1e-5, 1e-6, "PyTorch's output")
    assert layer.parameters() == []


def test_gelu_is_the_tanh_form_not_the_exact_one():
    case = REF.case("gelu_forms")  # torch's F.gelu with approximate="tanh", and without
    x, tanh_form, exact = case["x"], case["tanh_form"], case["exact"]
    got = gelu(x).data
    np.testing.assert_allclose(got, tanh_form, rtol=1e-5, atol=1e-6)
    assert np.abs(got - exact).max() > 1e-4  # the two forms differ measurably


def test_softmax_axis_argument_on_layer_and_function():
    for axis in (0, 1, -1, -2):
        case = REF.case(f"softmax_axis{axis}")
        x, want = case["x"], case["out"]
        wrong_output(
            softmax(x, axis=axis).data, want, SoftmaxFunction, 1e-5, 1e-7, "PyTorch's output"
        )
        wrong_output(
            Softmax(axis=axis)(x).data, want, SoftmaxFunction, 1e-5, 1e-7, "PyTorch's output"
        )


def test_activation_records_graph_only_when_asked():
    x = Tensor(np.ones(3), requires_grad=True)
    assert isinstance(gelu(x)._ctx, GELUFunction)
    assert softmax(np.ones(3))._ctx is None
