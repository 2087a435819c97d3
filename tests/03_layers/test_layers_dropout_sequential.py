"""Dropout (inverted, off in eval) and Sequential."""

import numpy as np
import pytest
from fdcheck import check_function

from tinytorch.core.layers import Dropout, DropoutFunction, Linear, Sequential
from tinytorch.core.tensor import Tensor


def test_dropout_function_gradient():
    rng = np.random.default_rng(0)
    mask = (rng.random((3, 4, 5)) > 0.3) / 0.7
    check_function(DropoutFunction, rng.standard_normal((3, 4, 5)), kwargs={"mask": mask})


def test_dropout_backward_uses_the_forward_mask():
    np.random.seed(0)
    x = Tensor(np.ones((50, 40)), requires_grad=True)
    y = Dropout(0.25)(x)
    grad = np.arange(2000, dtype=np.float32).reshape(50, 40)
    (gx,) = y._ctx.backward(grad)
    np.testing.assert_array_equal(gx, grad * y.data)  # y is exactly the mask when x is ones


def test_dropout_training_zeroes_and_rescales():
    np.random.seed(0)
    x = Tensor(np.full((200, 500), 2.0))
    y = Dropout(0.3)(x).data
    assert y.dtype == np.float32
    kept = y != 0
    np.testing.assert_allclose(y[kept], 2.0 / 0.7, rtol=1e-6)
    assert abs(1 - kept.mean() - 0.3) < 0.01
    assert abs(y.mean() - 2.0) < 0.03  # inverted dropout keeps the expected value


def test_dropout_is_identity_in_eval_and_for_zero_p():
    x = Tensor(np.random.default_rng(0).standard_normal((4, 5)))
    layer = Dropout(0.9).eval()
    np.testing.assert_array_equal(layer(x).data, x.data)
    np.testing.assert_array_equal(Dropout(0.0)(x).data, x.data)


def test_train_eval_toggles_dropout_inside_a_model():
    np.random.seed(0)
    model = Sequential(Linear(8, 8), Dropout(0.5))
    x = Tensor(np.ones((4, 8)))
    model.eval()
    first, second = model(x).data, model(x).data
    np.testing.assert_array_equal(first, second)
    model.train()
    assert np.any(model(x).data == 0) and not np.array_equal(model(x).data, model(x).data)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, "0.5", None])
def test_dropout_rejects_bad_probability(p):
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\)"):
        Dropout(p)


def test_sequential_chains_layers_in_order():
    np.random.seed(3)
    a, b = Linear(3, 4), Linear(4, 2)
    model = Sequential(a, b)
    x = np.random.standard_normal((5, 3)).astype(np.float32)
    want = (x @ a.weight.data + a.bias.data) @ b.weight.data + b.bias.data
    np.testing.assert_allclose(model(x).data, want, rtol=1e-5, atol=1e-6)
    assert len(model) == 2 and model[1] is b and list(model) == [a, b]
    assert model.parameters() == [a.weight, a.bias, b.weight, b.bias]


@pytest.mark.parametrize("wrap", [list, tuple])
def test_sequential_of_a_list_is_refused_at_construction_saying_how(wrap):
    """Issue 38: Sequential([a, b]) built and failed only when called; PyTorch refuses it too."""
    layers = wrap([Linear(2, 3), Linear(3, 1)])
    with pytest.raises(TypeError, match=r"Sequential\(a, b\).*Sequential\(\*layers\)"):
        Sequential(layers)
    assert len(Sequential(*layers)) == 2


def test_sequential_refuses_something_that_is_not_a_layer():
    with pytest.raises(TypeError, match="Sequential: int is not a layer"):
        Sequential(Linear(2, 3), 3)
