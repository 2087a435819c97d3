"""log_softmax and the binary cross-entropies, spelled and behaving as in PyTorch."""

import numpy as np
import oracle
import pytest
from fdcheck import check_function

import tinytorch.nn as nn
import tinytorch.nn.functional as TF
from tinytorch.core.losses import (
    BCEFunction,
    BCEWithLogitsFunction,
    LogSoftmaxFunction,
)
from tinytorch.core.tensor import ShapeError, Tensor

# PyTorch's values and gradients of the first input (tests/torch_oracle/m04_losses.py)
REF = oracle.load(__file__)


def _grads(ours, case, *names):
    """Loss and first-input gradient of a tinytorch function, and PyTorch's, on the case's
    arrays. The gradient is the function's own backward rule under d(sum of the output): these
    are module 04's checks, so they ask nothing of module 05's engine."""
    mine = [Tensor(case[name], requires_grad=True) for name in names]
    loss = ours(*mine)
    assert loss.grad_fn.parents[0] is mine[0]  # one Function between the input and the loss
    grad = loss.grad_fn.backward(np.ones(loss.shape, dtype=loss.dtype))[0]
    return loss.data, grad, case["out"], case["grad"]


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_log_softmax_matches_torch_values_and_gradients(dim):
    case = REF.case(f"log_softmax{dim}")  # F.log_softmax(x, dim=dim)
    x = case["x"]
    ours, g, theirs, tg = _grads(lambda t: TF.log_softmax(t, dim=dim), case, "x")
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-5)
    check_function(LogSoftmaxFunction, x, kwargs={"axis": dim})


def test_log_softmax_of_huge_logits_is_finite():
    out = TF.log_softmax(Tensor([[1000.0, 0.0, -1000.0]])).data
    assert np.isfinite(out).all() and out[0, 0] == 0.0


def test_bce_loss_matches_torch_on_probabilities():
    case = REF.case("bce")  # torch.nn.BCELoss()
    p, t = case["p"], case["t"]
    ours, g, theirs, tg = _grads(lambda a, b: nn.BCELoss()(a, b), case, "p", "t")
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(g, tg, rtol=1e-4, atol=1e-6)
    check_function(BCEFunction, p, t, wrt=[0], rtol=1e-4)


def test_bce_at_a_certain_wrong_answer_is_clamped_like_torch():
    case = REF.case("bce_clamped")  # F.binary_cross_entropy at p = 0 and 1
    ours = TF.binary_cross_entropy(case["p"], case["t"]).item()
    theirs = case["out"].item()
    assert np.isfinite(ours) and ours == pytest.approx(theirs, rel=1e-6)


def test_bce_with_logits_matches_torch_and_never_overflows():
    case = REF.case("bce_logits")  # torch.nn.BCEWithLogitsLoss(), |z| far beyond exp's range
    z, t = case["z"], case["t"]
    ours, g, theirs, tg = _grads(lambda a, b: nn.BCEWithLogitsLoss()(a, b), case, "z", "t")
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-7)
    check_function(BCEWithLogitsFunction, z / 10, t, wrt=[0])


def test_bce_errors_are_one_line():
    with pytest.raises(ShapeError, match="differs from target shape"):
        TF.binary_cross_entropy(np.full((2, 3), 0.5), np.ones((3, 2)))
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\].*with_logits"):
        TF.binary_cross_entropy(np.array([1.5]), np.array([1.0]))
