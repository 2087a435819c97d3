"""Gradient clipping and the cosine schedule against PyTorch.

PyTorch's answers are committed in torch_reference.npz (tests/torch_oracle/m07_training.py).
"""

import math

import numpy as np
import oracle
import pytest

from tinytorch.core.tensor import Tensor
from tinytorch.core.training import CosineSchedule, clip_grad_norm

REF = oracle.load(__file__)


def _grads(scale, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [(rng.standard_normal(s) * scale).astype(np.float32) for s in [(6, 5), (5,), (3, 2)]]
    ours = [Tensor(np.zeros(a.shape), requires_grad=True) for a in arrays]
    for p, a in zip(ours, arrays):
        p.grad = a.copy()
    return ours, arrays


@pytest.mark.parametrize("scale", [0.01, 1.0, 50.0])
@pytest.mark.parametrize("max_norm", [0.5, 1.0, 1e3])
def test_clip_grad_norm_matches_torch(scale, max_norm):
    case = REF.case(f"clip/{scale}/{max_norm}")  # torch.nn.utils.clip_grad_norm_
    ours, arrays = _grads(scale)
    for j, a in enumerate(arrays):
        np.testing.assert_array_equal(a, case[f"grad{j}"])
    ours.append(Tensor(np.ones(4), requires_grad=True))  # no gradient: ignored
    total = clip_grad_norm(ours, max_norm)
    assert isinstance(total, float)
    assert total == pytest.approx(float(case["total"]), rel=1e-6)
    for j, p in enumerate(ours[:-1]):
        np.testing.assert_allclose(p.grad, case[f"clipped{j}"], rtol=1e-6, atol=1e-9)
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


@pytest.mark.parametrize(
    ("i", "max_lr", "warmup", "total", "min_lr"),
    [(0, 1e-3, 10, 100, 1e-4), (1, 0.5, 3, 20, 0.0)],
)
def test_cosine_schedule_matches_torch_schedulers(i, max_lr, warmup, total, min_lr):
    # torch's LinearLR for the warmup, then CosineAnnealingLR, in a SequentialLR
    schedule = CosineSchedule(max_lr, warmup, total, min_lr=min_lr)
    ours = [schedule(s) for s in range(total + 1)]
    np.testing.assert_allclose(ours, REF[f"schedule/{i}/lrs"], rtol=1e-6, atol=1e-12)


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
