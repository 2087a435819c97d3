"""log_softmax and the binary cross-entropies, spelled and behaving as in PyTorch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fdcheck import check_function

import tinytorch.nn as nn
import tinytorch.nn.functional as TF
from tinytorch.core.losses import (
    BCEFunction,
    BCEWithLogitsFunction,
    LogSoftmaxFunction,
)
from tinytorch.core.tensor import ShapeError, Tensor

rng = np.random.default_rng(0)


def _grads(ours, theirs, *arrays):
    """Loss and input gradient of a tinytorch and a torch function on the same float32 arrays."""
    mine = [Tensor(a, requires_grad=True) for a in arrays]
    loss = ours(*mine)
    loss.backward() if loss.size == 1 else (loss * Tensor(np.ones(loss.shape))).sum().backward()
    ref = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = theirs(*ref)
    (out if out.numel() == 1 else out.sum()).backward()
    return loss.data, mine[0].grad, out.detach().numpy(), ref[0].grad.numpy()


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_log_softmax_matches_torch_values_and_gradients(dim):
    x = rng.normal(scale=4.0, size=(3, 5)).astype(np.float32)
    ours, g, theirs, tg = _grads(lambda t: TF.log_softmax(t, dim=dim),
                                 lambda t: F.log_softmax(t, dim=dim), x)  # fmt: skip
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-5)
    check_function(LogSoftmaxFunction, x, kwargs={"axis": dim})


def test_log_softmax_of_huge_logits_is_finite():
    out = TF.log_softmax(Tensor([[1000.0, 0.0, -1000.0]])).data
    assert np.isfinite(out).all() and out[0, 0] == 0.0


def test_bce_loss_matches_torch_on_probabilities():
    p = rng.uniform(0.02, 0.98, size=(4, 3)).astype(np.float32)
    t = (rng.uniform(size=(4, 3)) > 0.5).astype(np.float32)
    ours, g, theirs, tg = _grads(lambda a, b: nn.BCELoss()(a, b),
                                 lambda a, b: torch.nn.BCELoss()(a, b), p, t)  # fmt: skip
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(g, tg, rtol=1e-4, atol=1e-6)
    check_function(BCEFunction, p, t, wrt=[0], rtol=1e-4)


def test_bce_at_a_certain_wrong_answer_is_clamped_like_torch():
    p, t = np.array([0.0, 1.0, 0.5], np.float32), np.array([1.0, 0.0, 1.0], np.float32)
    ours = TF.binary_cross_entropy(p, t).item()
    theirs = F.binary_cross_entropy(torch.tensor(p), torch.tensor(t)).item()
    assert np.isfinite(ours) and ours == pytest.approx(theirs, rel=1e-6)


def test_bce_with_logits_matches_torch_and_never_overflows():
    z = rng.normal(scale=30.0, size=(5, 2)).astype(np.float32)  # far beyond exp's range in float32
    t = (rng.uniform(size=(5, 2)) > 0.5).astype(np.float32)
    ours, g, theirs, tg = _grads(lambda a, b: nn.BCEWithLogitsLoss()(a, b),
                                 lambda a, b: torch.nn.BCEWithLogitsLoss()(a, b), z, t)  # fmt: skip
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-7)
    check_function(BCEWithLogitsFunction, z / 10, t, wrt=[0])


def test_a_logistic_regression_trains_with_bce_as_in_pytorch():
    from tinytorch.optim import SGD

    data = np.random.default_rng(4)  # its own draws: the module's rng depends on test order
    x = data.normal(size=(64, 2)).astype(np.float32)
    y = (x[:, :1] + x[:, 1:] > 0).astype(np.float32)
    np.random.seed(4)  # Linear draws its initial weights from numpy's global generator
    model = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
    loss_fn, optimizer = nn.BCELoss(), SGD(model.parameters(), lr=0.5)
    first = None
    for _ in range(60):
        optimizer.zero_grad()
        loss = loss_fn(model(Tensor(x)), Tensor(y))
        loss.backward()
        optimizer.step()
        first = loss.item() if first is None else first
    assert loss.item() < first / 3


def test_bce_errors_are_one_line():
    with pytest.raises(ShapeError, match="differs from target shape"):
        TF.binary_cross_entropy(np.full((2, 3), 0.5), np.ones((3, 2)))
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\].*with_logits"):
        TF.binary_cross_entropy(np.array([1.5]), np.array([1.0]))
