"""`Layer` (the TinyTorch book's name) is the Module base class; state_dict round trips as in
PyTorch: save a model's state, build a fresh model, load it, get the same outputs."""

import numpy as np
import pytest

import tinytorch.nn as nn
from tinytorch.core.layers import Layer, Linear, Module, Sequential
from tinytorch.core.tensor import Tensor


def test_layer_is_module():
    assert Layer is Module and nn.Layer is Module

    class Scale(Layer):  # a subclass as the book writes it
        def __init__(self):
            self.linear = Linear(3, 2)

        def forward(self, x):
            return self.linear(x) * 2

    assert len(list(Scale().parameters())) == 2


class ReLU(Module):
    """max(x, 0) from module 01's Tensor: module 03 requires no 02, so no nn.ReLU here (a
    student edition may hold module 02's stubs)."""

    def forward(self, x):
        return x * Tensor(x.data > 0)


def test_state_dict_then_load_state_dict_into_a_fresh_model():
    np.random.seed(0)
    model = Sequential(Linear(4, 8), ReLU(), Linear(8, 2))
    state = model.state_dict()
    np.random.seed(1)
    fresh = Sequential(Linear(4, 8), ReLU(), Linear(8, 2))
    x = Tensor(np.random.default_rng(2).normal(size=(5, 4)))
    assert not np.allclose(fresh(x).data, model(x).data)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh(x).data, model(x).data)
    state[next(iter(state))][...] = 0  # a copy, as torch's state_dict after clone()
    np.testing.assert_array_equal(fresh(x).data, model(x).data)


def test_load_state_dict_of_another_architecture_names_the_keys():
    with pytest.raises(KeyError, match="missing keys"):
        Sequential(Linear(4, 2)).load_state_dict(
            Sequential(Linear(4, 8), Linear(8, 2)).state_dict()
        )
