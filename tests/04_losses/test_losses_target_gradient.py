"""Issue 38: a target that requires grad gets its gradient from every loss (as from MSELoss and
in PyTorch), checked by central differences; log_softmax takes dim= and axis=."""

import numpy as np
import pytest
from fdcheck import check_function

import tinytorch.nn as nn
import tinytorch.nn.functional as TF
from tinytorch.core.losses import BCEFunction, BCEWithLogitsFunction, MSEFunction
from tinytorch.core.tensor import Tensor

rng = np.random.default_rng(7)
P = rng.uniform(0.05, 0.95, size=(3, 4))  # probabilities, clear of the clamped ends
T = rng.uniform(0.1, 0.9, size=(3, 4))  # soft targets: the loss is smooth in them
Z = rng.normal(scale=2.0, size=(3, 4))


@pytest.mark.parametrize(
    "fn, first", [(BCEFunction, P), (BCEWithLogitsFunction, Z), (MSEFunction, P)],
    ids=["bce", "bce-with-logits", "mse"],
)  # fmt: skip
def test_the_target_gradient_matches_central_differences(fn, first):
    check_function(fn, first, T, wrt=[0, 1], rtol=1e-5)


@pytest.mark.parametrize("loss", [nn.BCELoss(), nn.BCEWithLogitsLoss(), nn.MSELoss()])
def test_a_target_that_requires_grad_receives_one_through_the_engine(loss):
    prediction, target = Tensor(P, requires_grad=True), Tensor(T, requires_grad=True)
    loss(prediction, target).backward()
    assert target.grad is not None and target.grad.shape == T.shape
    assert np.abs(target.grad).max() > 0


def test_a_plain_target_still_gets_no_gradient():
    target = Tensor(T)
    nn.BCELoss()(Tensor(P, requires_grad=True), target).backward()
    assert target.grad is None


def test_log_softmax_takes_dim_or_axis_and_refuses_two_that_disagree():
    x = rng.normal(size=(3, 5))
    by_dim, by_axis = TF.log_softmax(x, dim=0).data, TF.log_softmax(x, axis=0).data
    np.testing.assert_array_equal(by_dim, by_axis)
    np.testing.assert_allclose(np.exp(by_dim).sum(axis=0), np.ones(5), rtol=1e-6)
    np.testing.assert_array_equal(TF.log_softmax(x).data, TF.log_softmax(x, -1).data)
    with pytest.raises(ValueError, match="dim=0 and axis=1 disagree"):
        TF.log_softmax(x, dim=0, axis=1)
