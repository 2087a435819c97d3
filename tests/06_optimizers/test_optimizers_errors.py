"""Bad arguments and mismatched state dicts fail with one clear message."""

import numpy as np
import pytest

from tinytorch.core.optimizers import SGD, Adam, AdamW
from tinytorch.core.tensor import Tensor


def _p(shape=(2, 3)):
    return Tensor(np.zeros(shape), requires_grad=True)


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
@pytest.mark.parametrize("lr", [-0.1, float("nan"), float("inf"), "fast"])
def test_bad_lr(cls, lr):
    with pytest.raises(ValueError, match="lr must be a number >= 0"):
        cls([_p()], lr=lr)


@pytest.mark.parametrize("cls", [Adam, AdamW])
@pytest.mark.parametrize("betas", [(1.0, 0.999), (0.9, 1.0), (-0.1, 0.9), (0.9, 1.5)])
def test_betas_outside_unit_interval(cls, betas):
    with pytest.raises(ValueError, match=r"beta[12] must be a number >= 0.0 and < 1.0"):
        cls([_p()], betas=betas)


def test_betas_not_a_pair():
    with pytest.raises(ValueError, match="betas must be a pair"):
        Adam([_p()], betas=0.9)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        pytest.param(lambda: SGD([_p()], lr=0.1, momentum=-0.5), "momentum", id="SGD-momentum"),
        pytest.param(
            lambda: SGD([_p()], lr=0.1, weight_decay=-1), "weight_decay", id="SGD-weight_decay"
        ),
        pytest.param(lambda: Adam([_p()], eps=-1e-8), "eps", id="Adam-eps"),
        pytest.param(
            lambda: AdamW([_p()], weight_decay=-0.01), "weight_decay", id="AdamW-weight_decay"
        ),
    ],
)
def test_negative_hyperparameters(make, name):
    with pytest.raises(ValueError, match=f"{name} must be a number >= 0"):
        make()


def test_empty_or_wrong_parameters():
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(TypeError, match="parameter 1 is a ndarray, not a Tensor"):
        SGD([_p(), np.zeros(3)], lr=0.1)


def test_load_state_dict_rejects_other_shapes_and_keys():
    source = Adam([_p((2, 3))])
    source.params[0].grad = np.ones((2, 3), dtype=np.float32)
    source.step()
    with pytest.raises(ValueError, match=r"has shape \(2, 3\) but parameter 0 has \(3, 2\)"):
        Adam([_p((3, 2))]).load_state_dict(source.state_dict())
    with pytest.raises(ValueError, match="entry for parameter 1 but the optimizer holds 1"):
        Adam([_p()]).load_state_dict({"state.1.exp_avg": np.zeros((2, 3))})
    with pytest.raises(ValueError, match="unexpected optimizer state key 'momentum'"):
        Adam([_p()]).load_state_dict({"momentum": 0.9})
    target = Adam([_p((3, 2))], lr=0.5)
    with pytest.raises(ValueError):
        target.load_state_dict({"lr": 0.1, **source.state_dict()})
    assert target.lr == 0.5 and target.state == [{}]  # nothing changed by a failed load
