"""BatchNorm2d: train and eval mode, running statistics and gradients against torch."""

import numpy as np
import pytest
import torch
from fdcheck import check_function

from tinytorch.core.spatial import BatchNorm2d, BatchNorm2dFunction
from tinytorch.core.tensor import Tensor, precision


def torch_pair(norm):
    ref = torch.nn.BatchNorm2d(norm.num_features, eps=norm.eps, momentum=norm.momentum).double()
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(norm.weight.data))
        ref.bias.copy_(torch.tensor(norm.bias.data))
    return ref


@pytest.mark.parametrize("shape", [(4, 3, 5, 2), (2, 1, 3, 3), (8, 5, 1, 1)])
def test_training_and_eval_match_torch_over_several_steps(shape):
    rng = np.random.default_rng(shape[1])
    with precision(np.float64):
        norm = BatchNorm2d(shape[1], momentum=0.3)
        norm.weight.data[:] = rng.uniform(0.5, 2.0, shape[1])
        norm.bias.data[:] = rng.standard_normal(shape[1])
    ref = torch_pair(norm)
    for step in range(3):
        x_np = rng.standard_normal(shape) * (step + 1) + step
        grad = rng.standard_normal(shape)
        with precision(np.float64):
            x = Tensor(x_np, requires_grad=True)
            norm.zero_grad()
            y = norm(x)
            y.backward(grad)
        tx = torch.tensor(x_np, requires_grad=True)
        ref.zero_grad()
        ty = ref(tx)
        ty.backward(torch.tensor(grad))
        np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(norm.weight.grad, ref.weight.grad.numpy(), rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(norm.bias.grad, ref.bias.grad.numpy(), rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(norm.running_mean, ref.running_mean.numpy(), rtol=1e-9)
        np.testing.assert_allclose(norm.running_var, ref.running_var.numpy(), rtol=1e-9)
    norm.eval()
    ref.eval()
    x_np, grad = rng.standard_normal((2, *shape[1:])), rng.standard_normal((2, *shape[1:]))
    with precision(np.float64):
        x = Tensor(x_np, requires_grad=True)
        y = norm(x)
        y.backward(grad)
    tx = torch.tensor(x_np, requires_grad=True)
    ty = ref(tx)
    ty.backward(torch.tensor(grad))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_eval_leaves_the_running_statistics_alone():
    norm = BatchNorm2d(2)
    norm(np.random.default_rng(0).standard_normal((4, 2, 3, 3)) + 5)
    before = norm.running_mean.copy(), norm.running_var.copy()
    norm.eval()
    norm(np.random.default_rng(1).standard_normal((4, 2, 3, 3)))
    np.testing.assert_array_equal(norm.running_mean, before[0])
    np.testing.assert_array_equal(norm.running_var, before[1])
    assert [n for n, _ in norm.named_parameters()] == ["weight", "bias"]


@pytest.mark.parametrize("batch_stats", [True, False])
def test_function_matches_finite_differences(batch_stats):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 2, 4, 3)) * 2 + 1
    w, b = rng.uniform(0.5, 2, 2), rng.standard_normal(2)
    if batch_stats:
        # the statistics must follow x as finite differences nudge it: wrap the function
        class WithStats(BatchNorm2dFunction):
            def forward(self, x, weight, bias):
                mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
                stats = {"mean": mean, "var": var, "eps": 1e-5, "batch_stats": True}
                return super().forward(x, weight, bias, **stats)

        check_function(WithStats, x, w, b, rtol=1e-5, atol=1e-7)
    else:
        mean, var = rng.standard_normal(2), rng.uniform(0.5, 2, 2)
        kwargs = {"mean": mean, "var": var, "eps": 1e-5, "batch_stats": False}
        check_function(BatchNorm2dFunction, x, w, b, kwargs=kwargs)
