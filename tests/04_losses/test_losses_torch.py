"""Loss values and logits/prediction gradients against PyTorch, float32."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tinytorch.core.losses import (
    CrossEntropyFunction,
    CrossEntropyLoss,
    MSEFunction,
    MSELoss,
    cross_entropy,
    mse_loss,
)
from tinytorch.core.tensor import Tensor


def _ce(logits, targets, ignore_index=None, grad=1.0):
    fn = CrossEntropyFunction()
    fn.needs_grad = (True,)
    loss = fn.forward(logits, targets=targets, ignore_index=ignore_index)
    (g,) = fn.backward(np.asarray(grad, dtype=logits.dtype))
    return loss, g


def _torch_ce(logits, targets, ignore_index=-100, grad=1.0):
    z = torch.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(
        z.reshape(-1, logits.shape[-1]),
        torch.tensor(targets.reshape(-1), dtype=torch.long),
        ignore_index=ignore_index,
    )
    loss.backward(torch.tensor(grad))
    return loss.detach().numpy(), z.grad.numpy()


@pytest.mark.parametrize("lead", [(), (6,), (2, 5), (2, 3, 4)])
def test_cross_entropy_matches_torch(lead):
    rng = np.random.default_rng(len(lead))
    logits = (2 * rng.standard_normal((*lead, 11))).astype(np.float32)
    targets = rng.integers(0, 11, size=lead)
    loss, g = _ce(logits, targets, grad=0.7)
    want_loss, want_g = _torch_ce(logits, targets, grad=0.7)
    assert loss.shape == () and loss.dtype == np.float32 and g.dtype == np.float32
    assert g.shape == logits.shape
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-7)


def test_cross_entropy_ignore_index_matches_torch():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, 7, 13)).astype(np.float32)
    targets = rng.integers(0, 13, size=(3, 7))
    targets[0, 4:] = targets[2, 1:] = -100  # padded tails of shorter sequences
    loss, g = _ce(logits, targets, ignore_index=-100)
    want_loss, want_g = _torch_ce(logits, targets, ignore_index=-100)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-7)
    assert np.all(g[0, 4:] == 0) and np.all(g[2, 1:] == 0)


def test_cross_entropy_ignore_index_may_be_a_valid_class_id():
    logits = np.random.default_rng(2).standard_normal((8, 4)).astype(np.float32)
    targets = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    loss, g = _ce(logits, targets, ignore_index=0)  # e.g. a <pad> token with id 0
    want_loss, want_g = _torch_ce(logits, targets, ignore_index=0)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-7)


def test_all_targets_ignored_gives_zero_loss_and_zero_gradient():
    logits = np.random.default_rng(3).standard_normal((2, 3, 5)).astype(np.float32)
    targets = np.full((2, 3), -100)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss, g = _ce(logits, targets, ignore_index=-100)
    assert loss == 0 and np.all(g == 0) and np.all(np.isfinite(g))


def test_cross_entropy_large_logits_are_stable():
    logits = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, 1e4], [-1e4, 0.0, 1e4]], dtype=np.float32)
    targets = np.array([1, 0, 2])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss, g = _ce(logits, targets)
    want_loss, want_g = _torch_ce(logits, targets)
    assert np.isfinite(loss) and np.all(np.isfinite(g))
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    np.testing.assert_allclose(g, want_g, rtol=1e-5, atol=1e-7)


def test_cross_entropy_entry_points_agree_and_accept_tensor_targets():
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((4, 6, 9)).astype(np.float32)
    targets = rng.integers(0, 9, size=(4, 6))
    targets[1, 3] = 7
    want = _torch_ce(logits, targets, ignore_index=7)[0]
    results = [
        cross_entropy(logits, targets, ignore_index=7),
        cross_entropy(Tensor(logits), Tensor(targets), ignore_index=7),
        CrossEntropyLoss(ignore_index=7)(logits, targets),
        CrossEntropyLoss(ignore_index=7).forward(Tensor(logits), targets.astype(np.int32)),
    ]
    for got in results:
        assert isinstance(got, Tensor) and got.shape == () and got.dtype == np.float32
        np.testing.assert_allclose(got.data, want, rtol=1e-5)


def test_cross_entropy_records_one_node_on_the_logits():
    logits = Tensor(np.zeros((2, 3)), requires_grad=True)
    loss = cross_entropy(logits, np.array([0, 2]))
    assert isinstance(loss._ctx, CrossEntropyFunction) and loss._ctx.parents == (logits,)
    np.testing.assert_allclose(loss.item(), np.log(3), rtol=1e-6)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_mse_matches_torch(shape):
    rng = np.random.default_rng(len(shape))
    p = rng.standard_normal(shape).astype(np.float32)
    t = rng.standard_normal(shape).astype(np.float32)
    fn = MSEFunction()
    fn.needs_grad = (True, True)
    loss = fn.forward(p, t)
    gp, gt = fn.backward(np.asarray(1.3, dtype=np.float32))
    tp, tt = torch.tensor(p, requires_grad=True), torch.tensor(t, requires_grad=True)
    want = F.mse_loss(tp, tt)
    want.backward(torch.tensor(1.3))
    assert loss.shape == () and loss.dtype == np.float32
    np.testing.assert_allclose(loss, want.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(gp, tp.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gt, tt.grad.numpy(), rtol=1e-5, atol=1e-7)
    for got in (mse_loss(p, t), MSELoss()(Tensor(p), t), MSELoss().forward(p, Tensor(t))):
        np.testing.assert_allclose(got.data, want.detach().numpy(), rtol=1e-5)
