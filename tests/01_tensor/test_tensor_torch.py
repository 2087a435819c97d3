"""Module 01: local backward rules agree with PyTorch's autograd on the same inputs.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m01_tensor.py).
"""

import numpy as np
import oracle
import pytest

from tinytorch.core.tensor import Div, MatMul, Max, Mean, Mul, Pow, Sum, Tensor, sum_to_shape

REF = oracle.load(__file__)


@pytest.mark.parametrize(
    "fn, name, kwargs",
    [
        (Mul, "mul", {}),
        (Div, "div", {}),
        (MatMul, "matmul", {}),
        (MatMul, "dot", {}),  # vector @ vector: a 0-d output
        (Pow, "pow", {"exponent": 2.5}),
        (Sum, "sum", {"axis": (0, 2)}),
        (Mean, "mean", {"axis": 1, "keepdims": True}),
        (Max, "max", {"axis": -1}),
    ],
)
def test_forward_and_backward_match_torch(fn, name, kwargs):
    case = REF.case(name)
    n = sum(key.startswith("input") for key in case)
    arrays = [case[f"input{i}"] for i in range(n)]
    op = fn()
    op.needs_grad = (True,) * len(arrays)
    out = op.forward(*arrays, **kwargs)
    grads = op.backward(case["weight"])
    np.testing.assert_allclose(out, case["out"], rtol=1e-5, atol=1e-6)
    for i, (a, g) in enumerate(zip(arrays, grads)):
        want = case[f"grad{i}"]
        np.testing.assert_allclose(sum_to_shape(g, a.shape), want, rtol=1e-4, atol=1e-5)


def test_a_comparison_indexes_as_a_mask_like_torch():
    case = REF.case("mask")
    x = Tensor(case["x"], requires_grad=True)
    picked = x[x > 0]
    np.testing.assert_array_equal(picked.data, case["out"])
    (grad,) = picked._ctx.backward(case["weight"])  # only the selected elements get a gradient
    np.testing.assert_array_equal(grad, case["grad"])


def test_power_zero_has_a_zero_gradient_like_torch():
    case = REF.case("pow_zero")
    op = Pow()
    op.needs_grad = (True,)
    np.testing.assert_array_equal(op.forward(case["x"], exponent=0), np.ones(3))
    (grad,) = op.backward(np.ones(3, dtype=np.float32))
    np.testing.assert_array_equal(grad, case["grad"])  # 0 at x = 0 too, not nan


def test_truth_of_a_tensor_like_torch():
    case = REF.case("truth")
    assert bool(Tensor([0.0])) == case["zero"]
    assert bool(Tensor(5.0) < 1.0) == case["five_below_one"] and bool(Tensor(5.0) > 1.0)
    assert case["many_raise"]
    with pytest.raises(ValueError, match=r"shape \(2,\) is ambiguous; reduce it"):
        bool(Tensor([1.0, 2.0]))
