"""Loss values and logits/prediction gradients against PyTorch, float32.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m04_losses.py).
"""

import numpy as np
import oracle
import pytest

from tinytorch.core.losses import (
    CrossEntropyFunction,
    CrossEntropyLoss,
    MSEFunction,
    MSELoss,
    cross_entropy,
    mse_loss,
)
from tinytorch.core.tensor import Tensor

REF = oracle.load(__file__)


def _ce(logits, targets, ignore_index=None, grad=1.0):
    fn = CrossEntropyFunction()
    fn.needs_grad = (True,)
    loss = fn.forward(logits, targets=targets, ignore_index=ignore_index)
    (g,) = fn.backward(np.asarray(grad, dtype=logits.dtype))
    return loss, g


def _torch_ce(name):
    """A case of F.cross_entropy: its logits, targets, loss and logits gradient."""
    case = REF.case(name)
    return case["logits"], case["targets"], case["loss"], case["grad"]


@pytest.mark.parametrize("lead", [(), (6,), (2, 5), (2, 3, 4)])
def test_cross_entropy_matches_torch(lead):
    logits, targets, want_loss, want_g = _torch_ce(f"ce/{len(lead)}")  # backward of 0.7 * loss
    assert logits.shape == (*lead, 11)
    loss, g = _ce(logits, targets, grad=0.7)
    assert loss.shape == () and loss.dtype == np.float32 and g.dtype == np.float32
    assert g.shape == logits.shape
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-7)


def test_cross_entropy_ignore_index_matches_torch():
    logits, targets, want_loss, want_g = _torch_ce("ce_ignore")
    assert (targets[0, 4:] == -100).all() and (targets[2, 1:] == -100).all()  # padded tails
    loss, g = _ce(logits, targets, ignore_index=-100)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-7)
    assert np.all(g[0, 4:] == 0) and np.all(g[2, 1:] == 0)


def test_cross_entropy_ignore_index_may_be_a_valid_class_id():
    logits, targets, want_loss, want_g = _torch_ce("ce_ignore_class0")  # ignore_index=0
    loss, g = _ce(logits, targets, ignore_index=0)  # e.g. a <pad> token with id 0
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-7)


def test_all_targets_ignored_gives_zero_loss_and_zero_gradient():
    logits = np.random.default_rng(3).standard_normal((2, 3, 5)).astype(np.float32)
    targets = np.full((2, 3), -100)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss, g = _ce(logits, targets, ignore_index=-100)
    assert loss == 0 and np.all(g == 0) and np.all(np.isfinite(g))


def test_cross_entropy_large_logits_are_stable():
    logits, targets, want_loss, want_g = _torch_ce("ce_large")  # logits of +-1e4
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss, g = _ce(logits, targets)
    assert np.isfinite(loss) and np.all(np.isfinite(g))
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    np.testing.assert_allclose(g, want_g, rtol=1e-5, atol=1e-7)


def test_cross_entropy_entry_points_agree_and_accept_tensor_targets():
    logits, targets, want, _ = _torch_ce("ce_entry_points")  # ignore_index=7
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
    case = REF.case(f"mse/{'x'.join(map(str, shape))}")  # F.mse_loss, backward of 1.3 * loss
    p, t, want = case["p"], case["t"], case["loss"]
    fn = MSEFunction()
    fn.needs_grad = (True, True)
    loss = fn.forward(p, t)
    gp, gt = fn.backward(np.asarray(1.3, dtype=np.float32))
    assert loss.shape == () and loss.dtype == np.float32
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    np.testing.assert_allclose(gp, case["grad_p"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gt, case["grad_t"], rtol=1e-5, atol=1e-7)
    for got in (mse_loss(p, t), MSELoss()(Tensor(p), t), MSELoss().forward(p, Tensor(t))):
        np.testing.assert_allclose(got.data, want, rtol=1e-5)
