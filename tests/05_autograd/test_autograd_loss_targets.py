"""The engine carries module 04's target gradients: a target that requires grad receives one from
every loss, and a plain target none (the rules themselves: tests/04_losses)."""

import numpy as np
import pytest

import tinytorch.nn as nn
from tinytorch.core.tensor import Tensor

rng = np.random.default_rng(7)
P = rng.uniform(0.05, 0.95, size=(3, 4))  # probabilities, clear of the clamped ends
T = rng.uniform(0.1, 0.9, size=(3, 4))


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
