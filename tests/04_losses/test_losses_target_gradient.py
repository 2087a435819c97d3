"""Issue 38: a target that requires grad gets its gradient from every loss (as from MSELoss and
in PyTorch), checked by central differences; log_softmax takes dim= and axis=. The same through
module 05's engine: tests/05_autograd/test_autograd_loss_targets.py."""

import numpy as np
import pytest
from fdcheck import check_function

import tinytorch.nn.functional as TF
from tinytorch.core.losses import BCEFunction, BCEWithLogitsFunction, MSEFunction

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


def test_log_softmax_takes_dim_or_axis_and_refuses_two_that_disagree():
    x = rng.normal(size=(3, 5))
    by_dim, by_axis = TF.log_softmax(x, dim=0).data, TF.log_softmax(x, axis=0).data
    np.testing.assert_array_equal(by_dim, by_axis)
    np.testing.assert_allclose(np.exp(by_dim).sum(axis=0), np.ones(5), rtol=1e-6)
    np.testing.assert_array_equal(TF.log_softmax(x).data, TF.log_softmax(x, -1).data)
    with pytest.raises(ValueError, match="dim=0 and axis=1 disagree"):
        TF.log_softmax(x, dim=0, axis=1)
