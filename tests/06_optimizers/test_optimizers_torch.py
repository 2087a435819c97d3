"""Every optimizer step equals torch.optim's on the same parameters and gradients.

torch.optim's end values, with the start values and gradients they came from, are committed in
torch_reference.npz (tests/torch_oracle/m06_optimizers.py).
"""

import numpy as np
import oracle
import pytest

from tinytorch.core.optimizers import SGD, Adam, AdamW
from tinytorch.core.tensor import Tensor

REF = oracle.load(__file__)
# the position in this list names the committed case (m06_optimizers.CASES, same order)
CASES = [
    (SGD, {"lr": 0.1}),
    (SGD, {"lr": 0.05, "momentum": 0.9}),
    (SGD, {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.1}),
    (SGD, {"lr": 0.05, "weight_decay": 0.3}),
    (Adam, {}),
    (Adam, {"lr": 0.01, "betas": (0.5, 0.9), "eps": 1e-6}),
    (Adam, {"lr": 0.01, "weight_decay": 0.1}),
    (AdamW, {}),
    (AdamW, {"lr": 0.02, "betas": (0.8, 0.95), "weight_decay": 0.1}),
]
INDEXED = [(i, cls, kwargs) for i, (cls, kwargs) in enumerate(CASES)]


def _replay(ours_cls, kwargs, case, lr_at=None):
    """tinytorch's optimizer through the case's steps: its parameters, torch's end values, it."""
    n = sum(k.startswith("start") for k in case)
    ours = [Tensor(case[f"start{j}"].copy(), requires_grad=True) for j in range(n)]
    opt = ours_cls(ours, **kwargs)
    step = 0
    while any(k.startswith(f"grad{step}_") for k in case):
        if lr_at is not None:
            opt.lr = lr_at(step)
        for j, p in enumerate(ours):
            p.grad = case[f"grad{step}_{j}"].copy() if f"grad{step}_{j}" in case else None
        opt.step()
        step += 1
    return ours, [case[f"end{j}"] for j in range(n)], opt


def _assert_match(ours, theirs):
    # 1e-6 relative to each tensor's scale: an element that an update drove close to zero
    # carries the rounding error of the larger numbers it was computed from.
    for p, want in zip(ours, theirs):
        np.testing.assert_allclose(p.data, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize(("i", "ours_cls", "kwargs"), INDEXED)
def test_steps_match_torch(i, ours_cls, kwargs):
    _assert_match(*_replay(ours_cls, kwargs, REF.case(f"steps/{i}"))[:2])


@pytest.mark.parametrize(("i", "ours_cls", "kwargs"), INDEXED)
def test_lr_set_between_steps_matches_torch(i, ours_cls, kwargs):
    base = kwargs.get("lr", 1e-3)
    case = REF.case(f"lr_between/{i}")
    _assert_match(*_replay(ours_cls, kwargs, case, lr_at=lambda s: base * (1 + s) / 6)[:2])


def test_adam_family_matches_torch_for_any_hyperparameters():
    for case in REF.cases("any"):  # 16 settings drawn at random from stated seeds
        kwargs = {
            "lr": float(case["lr"]),
            "betas": tuple(float(b) for b in case["betas"]),
            "weight_decay": float(case["weight_decay"]),
        }
        _assert_match(*_replay(AdamW if case["decoupled"] else Adam, kwargs, case)[:2])


@pytest.mark.parametrize(("i", "ours_cls", "kwargs"), INDEXED)
def test_parameter_without_gradient_is_skipped_like_torch(i, ours_cls, kwargs):
    case = REF.case(f"frozen/{i}")  # the second parameter never has a gradient
    ours, theirs, opt = _replay(ours_cls, kwargs, case)
    np.testing.assert_array_equal(ours[1].data, case["start1"])
    assert opt.state[1] == {}
    _assert_match(ours, theirs)
