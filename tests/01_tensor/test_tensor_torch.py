"""Module 01: local backward rules agree with PyTorch's autograd on the same inputs."""

import numpy as np
import pytest
import torch

from tinytorch.core.tensor import Div, MatMul, Max, Mean, Mul, Pow, Sum


@pytest.mark.parametrize(
    "fn, torch_fn, shapes, kwargs",
    [
        (Mul, lambda a, b: a * b, [(3, 4), (4,)], {}),
        (Div, lambda a, b: a / b, [(3, 4), (3, 1)], {}),
        (MatMul, lambda a, b: a @ b, [(2, 3, 4), (4, 5)], {}),
        (Pow, lambda a: a**2.5, [(3, 4)], {"exponent": 2.5}),
        (Sum, lambda a: a.sum(dim=(0, 2)), [(2, 3, 4)], {"axis": (0, 2)}),
        (Mean, lambda a: a.mean(dim=1, keepdim=True), [(2, 3, 4)], {"axis": 1, "keepdims": True}),
        (Max, lambda a: a.amax(dim=-1), [(2, 3, 4)], {"axis": -1}),
    ],
)
def test_forward_and_backward_match_torch(fn, torch_fn, shapes, kwargs):
    rng = np.random.default_rng(4)
    arrays = [rng.uniform(0.5, 2.0, size=s).astype(np.float32) for s in shapes]
    op = fn()
    op.needs_grad = (True,) * len(arrays)
    out = op.forward(*arrays, **kwargs)
    weight = rng.standard_normal(out.shape).astype(np.float32)
    grads = op.backward(weight)
    inputs = [torch.tensor(a, requires_grad=True) for a in arrays]
    expected = torch_fn(*inputs)
    (expected * torch.tensor(weight)).sum().backward()
    np.testing.assert_allclose(out, expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    for a, g, t in zip(arrays, grads, inputs):
        from tinytorch.core.tensor import sum_to_shape

        np.testing.assert_allclose(sum_to_shape(g, a.shape), t.grad.numpy(), rtol=1e-4, atol=1e-5)
