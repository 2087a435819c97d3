"""optimizer.param_groups, optimizer.state[p] and state_dict()/load_state_dict(), used the way
PyTorch code uses them, next to torch.optim doing the same."""

import numpy as np
import oracle
import pytest

from tinytorch.core.tensor import Tensor
from tinytorch.optim import SGD, Adam, AdamW


def _step(opt, params, grads):
    for p, g in zip(params, grads):
        p.grad = g.copy()
    opt.step()


REF = oracle.load(__file__)  # torch.optim doing the same (tests/torch_oracle/m06_optimizers.py)


def _pair(cls, **kwargs):
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=2).astype(np.float32)]
    ours = [Tensor(a.copy(), requires_grad=True) for a in start]
    return ours, cls(ours, **kwargs), rng


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_a_decay_written_over_param_groups_matches_torch(cls):
    case = REF.case(f"decay/{cls.__name__}")  # torch.optim's run of the same four steps
    ours, opt, _ = _pair(cls, lr=0.1)
    for j, p in enumerate(ours):
        np.testing.assert_array_equal(p.data, case[f"start{j}"])
    for step in range(4):
        _step(opt, ours, [case[f"grad{step}_{j}"] for j in range(len(ours))])
        for group in opt.param_groups:  # the torch idiom
            group["lr"] *= 0.5
    assert opt.lr == float(case["lr"]) == pytest.approx(0.1 / 16)
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["params"] == opt.params
    for j, p in enumerate(ours):
        np.testing.assert_allclose(p.data, case[f"end{j}"], rtol=1e-5, atol=1e-6)


def test_an_unknown_hyperparameter_in_a_group_is_named():
    ours, opt, _ = _pair(SGD, lr=0.1)
    with pytest.raises(KeyError, match="SGD has no hyperparameter 'betas'"):
        opt.param_groups[0]["betas"] = (0.9, 0.99)


def test_state_by_parameter_holds_adams_moments():
    ours, opt, rng = _pair(Adam, lr=0.01)
    grads = [rng.normal(size=p.shape).astype(np.float32) for p in ours]
    _step(opt, ours, grads)
    for j, p in enumerate(ours):
        mine = opt.state[p]
        assert isinstance(mine, dict) and p in opt.state
        moments = sorted(np.asarray(v).shape for v in mine.values() if np.ndim(v))
        want = REF[f"adam_state/{j}/moment_shapes"]  # torch's exp_avg, exp_avg_sq
        assert moments == [tuple(int(n) for n in shape) for shape in want]
    assert [k is p for k, p in zip(opt.state.keys(), ours)] == [True, True]
    assert len(opt.state.items()) == 2
    with pytest.raises(KeyError, match="not one of the optimizer's parameters"):
        opt.state[Tensor(np.ones(2))]


def test_resume_from_state_dicts_equals_an_uninterrupted_run():
    rng = np.random.default_rng(3)
    grads = [[rng.normal(size=(3, 2)).astype(np.float32)] for _ in range(6)]
    start = rng.normal(size=(3, 2)).astype(np.float32)

    whole = [Tensor(start.copy(), requires_grad=True)]
    opt = AdamW(whole, lr=0.05)
    for g in grads:
        _step(opt, whole, g)

    first = [Tensor(start.copy(), requires_grad=True)]
    opt = AdamW(first, lr=0.05)
    for g in grads[:3]:
        _step(opt, first, g)
    saved, weights = opt.state_dict(), first[0].data.copy()  # torch.save({...}) in PyTorch
    again = [Tensor(weights, requires_grad=True)]
    opt = AdamW(again, lr=0.9)  # the lr comes back from the state dict too
    opt.load_state_dict(saved)
    for g in grads[3:]:
        _step(opt, again, g)
    assert opt.lr == 0.05
    np.testing.assert_array_equal(again[0].data, whole[0].data)
