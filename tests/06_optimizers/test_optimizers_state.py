"""Optimizer state: float32, in place, zero_grad, state_dict round trips, and settable lr."""

import numpy as np
import pytest

from tinytorch.core.optimizers import SGD, Adam, AdamW
from tinytorch.core.tensor import Tensor

MAKERS = [  # the id names the optimizer a failing test ran
    pytest.param(lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01), id="SGD"),
    pytest.param(lambda ps: Adam(ps, lr=0.01, weight_decay=0.01), id="Adam"),
    pytest.param(lambda ps: AdamW(ps, lr=0.01), id="AdamW"),
]


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return [Tensor(rng.standard_normal(s), requires_grad=True) for s in [(5, 4), (4,)]]


def _grads(rng, params):
    return [rng.standard_normal(p.shape).astype(np.float32) for p in params]


def _step(opt, params, grads):
    for p, g in zip(params, grads):
        p.grad = g.copy()
    opt.step()


@pytest.mark.parametrize("make", MAKERS)
def test_update_is_in_place_float32_and_leaves_grad_alone(make):
    params = _params()
    arrays = [p.data for p in params]
    opt = make(params)
    grads = _grads(np.random.default_rng(1), params)
    for _ in range(3):
        _step(opt, params, grads)
    for p, a, g in zip(params, arrays, grads):
        assert p.data is a  # updated in place: views and references stay valid
        assert p.data.dtype == np.float32 and p.grad.dtype == np.float32
        np.testing.assert_array_equal(p.grad, g)  # weight decay must not leak into .grad
    for state in opt.state:
        for value in state.values():
            assert isinstance(value, int) or value.dtype == np.float32


@pytest.mark.parametrize("make", MAKERS)
def test_state_dict_round_trip_continues_identically(make):
    rng = np.random.default_rng(2)
    params = _params()
    opt = make(params)
    for _ in range(3):
        _step(opt, params, _grads(rng, params))
    saved = opt.state_dict()
    assert all(isinstance(v, (int, float, np.ndarray)) for v in saved.values())
    twins = [Tensor(p.data.copy(), requires_grad=True) for p in params]
    twin_opt = make(twins)
    twin_opt.lr = 123.0  # the hyperparameters come back from the state dict too
    twin_opt.load_state_dict(saved)
    assert twin_opt.lr == opt.lr
    for _ in range(3):
        grads = _grads(rng, params)
        _step(opt, params, grads)
        _step(twin_opt, twins, grads)
    for p, q in zip(params, twins):
        np.testing.assert_array_equal(p.data, q.data)


def test_state_dict_holds_copies():
    params = _params()
    opt = Adam(params)
    _step(opt, params, _grads(np.random.default_rng(3), params))
    saved = opt.state_dict()
    snapshot = saved["state.0.exp_avg"].copy()
    _step(opt, params, _grads(np.random.default_rng(4), params))
    np.testing.assert_array_equal(saved["state.0.exp_avg"], snapshot)
    assert saved["state.0.step"] == 1 and opt.state[0]["step"] == 2


def test_zero_grad_drops_or_zeroes_in_place():
    params = _params()
    opt = SGD(params, lr=0.1)
    params[0].grad = np.ones((5, 4), dtype=np.float32)
    kept = params[0].grad
    opt.zero_grad(set_to_none=False)
    assert params[0].grad is kept and not kept.any() and params[1].grad is None
    opt.zero_grad()
    assert all(p.grad is None for p in params)


@pytest.mark.parametrize(
    "make",
    [  # without weight decay too: then nothing makes a new array of the gradient on the way
        *MAKERS,
        pytest.param(lambda ps: SGD(ps, lr=0.1, momentum=0.9), id="SGD-no-decay"),
        pytest.param(lambda ps: Adam(ps, lr=0.01), id="Adam-no-decay"),
    ],
)
def test_a_gradient_array_kept_between_steps_is_never_the_state(make):
    """A training loop may keep each .grad array: zero_grad(set_to_none=False) zeroes it in place
    and backward adds into it. The optimizer's state (SGD's momentum buffer, Adam's moments)
    never shares its memory, so the steps equal those of fresh gradient arrays, and .grad holds
    the gradient after each step."""
    rng = np.random.default_rng(5)
    kept, fresh = _params(), _params()
    opt_kept, opt_fresh = make(kept), make(fresh)
    for p in kept:
        p.grad = np.zeros(p.shape, dtype=np.float32)
    for _ in range(4):
        grads = _grads(rng, kept)
        opt_kept.zero_grad(set_to_none=False)
        for p, g in zip(kept, grads):
            p.grad += g  # into the same array, as backward accumulates
        opt_kept.step()
        _step(opt_fresh, fresh, grads)
        for p, g in zip(kept, grads):
            np.testing.assert_array_equal(p.grad, g)  # the step left .grad alone
    for p, q in zip(kept, fresh):
        np.testing.assert_allclose(p.data, q.data, rtol=1e-6, atol=1e-7)
    for state in opt_kept.state:
        for name, value in state.items():
            shared = [
                np.shares_memory(value, p.grad) for p in kept if isinstance(value, np.ndarray)
            ]
            assert not any(shared), f"state[{name!r}] is a gradient array, not a copy of it"


def test_lr_is_a_plain_attribute():
    p = Tensor(np.array([1.0]), requires_grad=True)
    opt = SGD([p], lr=0.5)
    opt.lr = 0.25
    p.grad = np.array([2.0], dtype=np.float32)
    opt.step()
    np.testing.assert_allclose(p.data, [0.5])


def test_shared_parameter_is_updated_once():
    p = Tensor(np.array([1.0]), requires_grad=True)
    opt = SGD([p, p], lr=0.5)
    p.grad = np.array([1.0], dtype=np.float32)
    opt.step()
    np.testing.assert_allclose(p.data, [0.5])


def test_trains_a_parameter_through_autograd():
    target = np.array([3.0, -1.0, 0.5], dtype=np.float32)
    w = Tensor(np.zeros(3), requires_grad=True)
    opt = Adam([w], lr=0.1)
    for _ in range(300):
        opt.zero_grad()
        ((w - Tensor(target)) ** 2).sum().backward()
        opt.step()
    np.testing.assert_allclose(w.data, target, atol=1e-2)


@pytest.mark.parametrize("make", MAKERS)
def test_a_tensor_assigned_to_grad_steps_like_an_array(make):
    (a,), (b,) = _params()[:1], _params()[:1]
    a.grad = Tensor(np.ones(a.shape))  # as PyTorch code writes it
    b.grad = np.ones(b.shape, dtype=np.float32)
    make([a]).step()
    make([b]).step()
    assert a.data.dtype == np.float32 and np.array_equal(a.data, b.data)
