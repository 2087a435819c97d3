"""Trainer with its loss and optimizer swapped (the other common order) fails at once, in one
line."""

import pytest

from tinytorch.core.layers import Linear
from tinytorch.core.losses import MSELoss
from tinytorch.core.optimizers import SGD
from tinytorch.core.training import Trainer


def test_swapped_loss_and_optimizer_is_a_one_line_type_error():
    model = Linear(2, 1)
    optimizer = SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError) as err:
        Trainer(model, optimizer, MSELoss())
    message = str(err.value)
    assert "\n" not in message and "got a SGD as loss_fn and a MSELoss as optimizer" in message
    assert "Trainer(model, loss_fn, optimizer)" in message
    assert Trainer(model, MSELoss(), optimizer).optimizer is optimizer
