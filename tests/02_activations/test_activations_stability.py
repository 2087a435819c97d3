"""Extreme inputs, dtypes and bad axes."""

import warnings

import numpy as np
import oracle
import pytest

from tinytorch.core.activations import SigmoidFunction, SoftmaxFunction, gelu, sigmoid, softmax
from tinytorch.core.tensor import ShapeError, Tensor, precision

REF = oracle.load(__file__)  # PyTorch's answers (tests/torch_oracle/m02_activations.py)


@pytest.fixture(autouse=True)
def numpy_warnings_are_errors():
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        yield


def test_sigmoid_large_inputs_do_not_overflow():
    x, want = REF["sigmoid_large/x"], REF["sigmoid_large/out"]
    got = sigmoid(x).data
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert got[0] == 0.0 and got[-1] == 1.0 and np.all(np.isfinite(got))
    fn = SigmoidFunction()
    fn.forward(x)
    assert np.all(np.isfinite(fn.backward(np.ones_like(x))[0]))


def test_softmax_large_logits():
    x, want = REF["softmax_large/x"], REF["softmax_large/out"]
    got = softmax(x).data
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[1], np.full(3, 1 / 3), rtol=1e-6)


def test_softmax_does_not_modify_its_input():
    x = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    keep = x.copy()
    SoftmaxFunction().forward(x)
    np.testing.assert_array_equal(x, keep)


def test_gelu_far_tails():
    x = np.array([-30.0, -10.0, 10.0, 30.0], dtype=np.float32)
    np.testing.assert_allclose(gelu(x).data, [0.0, 0.0, 10.0, 30.0], atol=1e-6)


@pytest.mark.parametrize("func", [sigmoid, gelu, softmax])
def test_float64_stays_float64(func):
    with precision(np.float64):
        out = func(Tensor(np.linspace(-3, 3, 12).reshape(3, 4)))
    assert out.dtype == np.float64


@pytest.mark.parametrize("axis", [2, -3, 1.5])
def test_softmax_bad_axis_is_a_clear_error(axis):
    with pytest.raises(ShapeError, match=r"softmax: axis .* out of range .* 2 dimensions"):
        softmax(np.ones((2, 3)), axis=axis)


def test_softmax_of_a_scalar_is_a_clear_error():
    with pytest.raises(ShapeError, match="at least one dimension"):
        softmax(np.float32(1.0))
