"""Every optimizer step equals torch.optim's on the same parameters and gradients."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.core.optimizers import SGD, Adam, AdamW
from tinytorch.core.tensor import Tensor

SHAPES = [(4, 3), (3,), (2, 5, 2)]

CASES = [
    (SGD, torch.optim.SGD, {"lr": 0.1}),
    (SGD, torch.optim.SGD, {"lr": 0.05, "momentum": 0.9}),
    (SGD, torch.optim.SGD, {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.1}),
    (SGD, torch.optim.SGD, {"lr": 0.05, "weight_decay": 0.3}),
    (Adam, torch.optim.Adam, {}),
    (Adam, torch.optim.Adam, {"lr": 0.01, "betas": (0.5, 0.9), "eps": 1e-6}),
    (Adam, torch.optim.Adam, {"lr": 0.01, "weight_decay": 0.1}),
    (AdamW, torch.optim.AdamW, {}),
    (AdamW, torch.optim.AdamW, {"lr": 0.02, "betas": (0.8, 0.95), "weight_decay": 0.1}),
]


def _pair(seed):
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    ours = [Tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    return rng, ours, theirs


def _run(ours_cls, torch_cls, kwargs, steps=6, seed=0, lr_at=None):
    rng, ours, theirs = _pair(seed)
    opt, ref = ours_cls(ours, **kwargs), torch_cls(theirs, **kwargs)
    for step in range(steps):
        if lr_at is not None:
            opt.lr = lr_at(step)
            ref.param_groups[0]["lr"] = lr_at(step)
        for p, q in zip(ours, theirs):
            g = (rng.standard_normal(p.shape) * rng.uniform(0.01, 10)).astype(np.float32)
            p.grad, q.grad = g, torch.from_numpy(g.copy())
        opt.step()
        ref.step()
    return ours, theirs


def _assert_match(ours, theirs):
    # 1e-6 relative to each tensor's scale: an element that an update drove close to zero
    # carries the rounding error of the larger numbers it was computed from.
    for p, q in zip(ours, theirs):
        want = q.detach().numpy()
        np.testing.assert_allclose(p.data, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize(("ours_cls", "torch_cls", "kwargs"), CASES)
def test_steps_match_torch(ours_cls, torch_cls, kwargs):
    _assert_match(*_run(ours_cls, torch_cls, kwargs))


@pytest.mark.parametrize(("ours_cls", "torch_cls", "kwargs"), CASES)
def test_lr_set_between_steps_matches_torch(ours_cls, torch_cls, kwargs):
    base = kwargs.get("lr", 1e-3)
    _assert_match(*_run(ours_cls, torch_cls, kwargs, lr_at=lambda s: base * (1 + s) / 6))


@settings(max_examples=25, deadline=None, database=None)
@given(
    lr=st.floats(1e-4, 0.5),
    beta1=st.floats(0.0, 0.99),
    beta2=st.floats(0.5, 0.9999),
    weight_decay=st.floats(0.0, 0.5),
    decoupled=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_adam_family_matches_torch_for_any_hyperparameters(
    lr, beta1, beta2, weight_decay, decoupled, seed
):
    kwargs = {"lr": lr, "betas": (beta1, beta2), "weight_decay": weight_decay}
    pair = (AdamW, torch.optim.AdamW) if decoupled else (Adam, torch.optim.Adam)
    _assert_match(*_run(*pair, kwargs, steps=4, seed=seed))


@pytest.mark.parametrize(("ours_cls", "torch_cls", "kwargs"), CASES)
def test_parameter_without_gradient_is_skipped_like_torch(ours_cls, torch_cls, kwargs):
    rng, ours, theirs = _pair(1)
    opt, ref = ours_cls(ours, **kwargs), torch_cls(theirs, **kwargs)
    frozen = ours[1].data.copy()
    for _ in range(3):
        for i in (0, 2):
            g = rng.standard_normal(ours[i].shape).astype(np.float32)
            ours[i].grad, theirs[i].grad = g, torch.from_numpy(g.copy())
        opt.step()
        ref.step()
    np.testing.assert_array_equal(ours[1].data, frozen)
    assert opt.state[1] == {}
    _assert_match(ours, theirs)
