"""Local backward rules of every activation against central differences (float64). Each check
first compares the forward with the formula (so a wrong forward is named as the forward's slip,
not as a backward that central differences of it would blame)."""

import numpy as np
from fdcheck import check_function
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from tinytorch.core.activations import (
    GELUFunction,
    ReLUFunction,
    SigmoidFunction,
    SoftmaxFunction,
    TanhFunction,
)

finite = st.floats(-6, 6, allow_nan=False, allow_infinity=False)
inputs = arrays(np.float64, array_shapes(min_dims=1, max_dims=3, max_side=4), elements=finite)


def _relu(x):
    return np.maximum(x, 0)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _away_from_kink(x):
    """ReLU has no derivative at 0: keep finite-difference probes clear of it."""
    return np.where(np.abs(x) < 1e-3, 0.5, x)


@settings(max_examples=20, deadline=None)
@given(x=inputs)
def test_relu_backward(x):
    check_function(ReLUFunction, _away_from_kink(x), reference=_relu)


@settings(max_examples=20, deadline=None)
@given(x=inputs)
def test_sigmoid_backward(x):
    check_function(SigmoidFunction, x, reference=_sigmoid)


@settings(max_examples=20, deadline=None)
@given(x=inputs)
def test_tanh_backward(x):
    check_function(TanhFunction, x, reference=np.tanh)


@settings(max_examples=20, deadline=None)
@given(x=inputs)
def test_gelu_backward(x):
    check_function(GELUFunction, x, reference=_gelu)


@settings(max_examples=20, deadline=None)
@given(x=inputs, data=st.data())
def test_softmax_backward_any_axis(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    check_function(SoftmaxFunction, x, kwargs={"axis": axis}, reference=_softmax)


def test_sigmoid_backward_in_saturation():
    x = np.array([-15.0, -8.0, 8.0, 15.0])  # slopes from 3e-7 to 3e-4
    check_function(SigmoidFunction, x, rtol=1e-4, atol=1e-10, reference=_sigmoid)
