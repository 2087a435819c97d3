"""Module 01: local backward rules agree with PyTorch's autograd on the same inputs.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m01_tensor.py).
"""

import numpy as np
import oracle
import pytest

from tinytorch.core.tensor import Div, MatMul, Max, Mean, Mul, Pow, Sum, sum_to_shape

REF = oracle.load(__file__)


@pytest.mark.parametrize(
    "fn, name, kwargs",
    [
        (Mul, "mul", {}),
        (Div, "div", {}),
        (MatMul, "matmul", {}),
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
