"""Gradient clipping and the cosine schedule against PyTorch."""

import math

import numpy as np
import pytest
import torch

from tinytorch.core.tensor import Tensor
from tinytorch.core.training import CosineSchedule, clip_grad_norm


def _grads(scale, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [(rng.standard_normal(s) * scale).astype(np.float32) for s in [(6, 5), (5,), (3, 2)]]
    ours = [Tensor(np.zeros(a.shape), requires_grad=True) for a in arrays]
    theirs = [torch.zeros(a.shape, requires_grad=True) for a in arrays]
    for p, q, a in zip(ours, theirs, arrays):
        p.grad, q.grad = a.copy(), torch.from_numpy(a.copy())
    return ours, theirs


@pytest.mark.parametrize("scale", [0.01, 1.0, 50.0])
@pytest.mark.parametrize("max_norm", [0.5, 1.0, 1e3])
def test_clip_grad_norm_matches_torch(scale, max_norm):
    ours, theirs = _grads(scale)
    ours.append(Tensor(np.ones(4), requires_grad=True))  # no gradient: ignored
    total = clip_grad_norm(ours, max_norm)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert isinstance(total, float)
    assert total == pytest.approx(float(expected), rel=1e-6)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-6, atol=1e-9)
        assert p.grad.dtype == np.float32
    assert ours[-1].grad is None


def test_clip_scales_gradients_in_place():
    ours, _ = _grads(10.0)
    arrays = [p.grad for p in ours]
    clip_grad_norm(ours, 1.0)
    assert all(p.grad is a for p, a in zip(ours, arrays))
    norm = math.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2)) for p in ours))
    assert norm == pytest.approx(1.0, rel=1e-5)


def test_clip_without_any_gradient_returns_zero():
    assert clip_grad_norm([Tensor(np.ones(3), requires_grad=True)], 1.0) == 0.0


@pytest.mark.parametrize("max_norm", [0, -1.0, float("nan"), float("inf"), "1"])
def test_clip_rejects_non_positive_max_norm(max_norm):
    with pytest.raises(ValueError, match="max_norm must be a positive number"):
        clip_grad_norm(_grads(1.0)[0], max_norm)


def _torch_lrs(max_lr, warmup, total, min_lr, steps):
    """The same schedule built from torch's own schedulers: LinearLR, then CosineAnnealingLR."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=max_lr)
    warm = torch.optim.lr_scheduler.LinearLR(
        opt, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1
    )
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=min_lr)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cosine], milestones=[warmup])
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


@pytest.mark.parametrize(
    ("max_lr", "warmup", "total", "min_lr"), [(1e-3, 10, 100, 1e-4), (0.5, 3, 20, 0.0)]
)
def test_cosine_schedule_matches_torch_schedulers(max_lr, warmup, total, min_lr):
    schedule = CosineSchedule(max_lr, warmup, total, min_lr=min_lr)
    ours = [schedule(s) for s in range(total + 1)]
    np.testing.assert_allclose(
        ours, _torch_lrs(max_lr, warmup, total, min_lr, total + 1), rtol=1e-6, atol=1e-12
    )


def test_cosine_schedule_key_points_follow_the_formula():
    max_lr, min_lr, warmup, total = 3e-4, 3e-5, 100, 1000
    s = CosineSchedule(max_lr, warmup, total, min_lr)
    assert s(0) == pytest.approx(max_lr / warmup)  # warmup start: one step's worth
    assert s(warmup - 1) == pytest.approx(max_lr)  # warmup end
    assert s(warmup) == pytest.approx(max_lr)  # cosine start
    mid = (warmup + total) // 2
    assert s(mid) == pytest.approx((max_lr + min_lr) / 2)
    assert s(total - 1) == pytest.approx(
        min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * (total - 1 - warmup) / 900)) / 2
    )
    assert s(total) == min_lr and s(10 * total) == min_lr
    values = [s(i) for i in range(warmup, total + 1)]
    assert all(a >= b for a, b in zip(values, values[1:]))  # never rises after warmup


def test_cosine_schedule_without_warmup_starts_at_max():
    assert CosineSchedule(0.1, 0, 10)(0) == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((1e-3, 10, 10), "warmup_steps < total_steps"),
        ((1e-3, -1, 10), "warmup_steps < total_steps"),
        ((1e-3, 0, 10, 1e-2), "min_lr <= max_lr"),
        ((-1e-3, 0, 10), "min_lr <= max_lr"),
    ],
)
def test_cosine_schedule_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        CosineSchedule(*args)


def test_cosine_schedule_rejects_negative_step():
    with pytest.raises(ValueError, match="step must be >= 0"):
        CosineSchedule(1e-3, 2, 10)(-1)
