"""BatchNorm2d: train and eval mode, running statistics and gradients against torch.

torch.nn.BatchNorm2d's answers are committed in torch_reference.npz
(tests/torch_oracle/m09_convolutions.py).
"""

import numpy as np
import oracle
import pytest
from fdcheck import check_function

from tinytorch.core.layers import Sequential
from tinytorch.core.spatial import BatchNorm2d, BatchNorm2dFunction, Conv2d
from tinytorch.core.tensor import Tensor, precision

REF = oracle.load(__file__)


@pytest.mark.parametrize("shape", [(4, 3, 5, 2), (2, 1, 3, 3), (8, 5, 1, 1)])
def test_training_and_eval_match_torch_over_several_steps(shape):
    name = "batchnorm/" + "x".join(map(str, shape))
    with precision(np.float64):
        norm = BatchNorm2d(shape[1], momentum=0.3)
        norm.weight.data[:] = REF[f"{name}/weight"]
        norm.bias.data[:] = REF[f"{name}/bias"]
    for step in range(3):
        want = REF.case(f"{name}/step{step}")
        with precision(np.float64):
            x = Tensor(want["x"], requires_grad=True)
            norm.zero_grad()
            y = norm(x)
            y.backward(want["grad"])
        np.testing.assert_allclose(y.data, want["y"], rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(x.grad, want["grad_x"], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(norm.weight.grad, want["grad_weight"], rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(norm.bias.grad, want["grad_bias"], rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(norm.running_mean, want["mean"], rtol=1e-9)
        np.testing.assert_allclose(norm.running_var, want["var"], rtol=1e-9)
    norm.eval()
    want = REF.case(f"{name}/eval")
    with precision(np.float64):
        x = Tensor(want["x"], requires_grad=True)
        y = norm(x)
        y.backward(want["grad"])
    np.testing.assert_allclose(y.data, want["y"], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(x.grad, want["grad_x"], rtol=1e-9, atol=1e-10)


def test_eval_leaves_the_running_statistics_alone():
    norm = BatchNorm2d(2)
    norm(np.random.default_rng(0).standard_normal((4, 2, 3, 3)) + 5)
    before = norm.running_mean.copy(), norm.running_var.copy()
    norm.eval()
    norm(np.random.default_rng(1).standard_normal((4, 2, 3, 3)))
    np.testing.assert_array_equal(norm.running_mean, before[0])
    np.testing.assert_array_equal(norm.running_var, before[1])
    assert [n for n, _ in norm.named_parameters()] == ["weight", "bias"]


def test_a_saved_and_reloaded_model_predicts_the_same_in_eval_mode():
    rng = np.random.default_rng(5)
    np.random.seed(5)
    model = Sequential(Conv2d(1, 2, 3), BatchNorm2d(2))
    for _ in range(20):  # training-mode batches move the running statistics away from 0 and 1
        model(rng.standard_normal((8, 1, 6, 6)) * 3 + 5)
    state = model.state_dict()
    assert [k for k in state if "running" in k] == ["layers.1.running_mean", "layers.1.running_var"]
    assert len(model.parameters()) == 4  # the running statistics are buffers, not parameters
    np.random.seed(6)
    reloaded = Sequential(Conv2d(1, 2, 3), BatchNorm2d(2))
    reloaded.load_state_dict(state)
    x = rng.standard_normal((4, 1, 6, 6)) * 3 + 5
    model.eval(), reloaded.eval()
    np.testing.assert_array_equal(reloaded[1].running_mean, model[1].running_mean)
    np.testing.assert_array_equal(reloaded[1].running_var, model[1].running_var)
    np.testing.assert_array_equal(reloaded(x).data, model(x).data)


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
