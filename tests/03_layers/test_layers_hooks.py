"""Layer calls are told to the engine's listeners: enter and exit around each module's forward,
nested in call order, with the module's own output."""

import numpy as np

from tinytorch.core.hooks import Listener, listen
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.tensor import Tensor


class Calls(Listener):
    def __init__(self):
        self.events = []

    def enter(self, module):
        self.events.append(("enter", type(module).__name__))

    def exit(self, module, output, seconds):
        self.events.append(("exit", type(module).__name__, output.shape))


def test_nested_layer_calls_are_heard_in_order():
    np.random.seed(0)
    model = Sequential(Linear(3, 4), Linear(4, 2))
    x = Tensor(np.ones((5, 3)))
    plain = model(x).data
    with listen(Calls()) as calls:
        heard = model(x).data
    np.testing.assert_array_equal(plain, heard)
    assert calls.events == [
        ("enter", "Sequential"),
        ("enter", "Linear"),
        ("exit", "Linear", (5, 4)),
        ("enter", "Linear"),
        ("exit", "Linear", (5, 2)),
        ("exit", "Sequential", (5, 2)),
    ]
