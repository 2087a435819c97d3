"""Module 05: the engine drives the operations of modules 02-04 end to end."""

import numpy as np
import oracle
from fdcheck import check_graph

from tinytorch.core.activations import gelu, relu, sigmoid, softmax, tanh
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.losses import cross_entropy, mse_loss
from tinytorch.core.tensor import Tensor, precision


def test_activation_chain_matches_finite_differences():
    x = np.random.default_rng(0).standard_normal((3, 5)) + 0.05  # away from relu's kink
    check_graph(lambda t: softmax(gelu(t) + sigmoid(t) * tanh(t) + relu(t), axis=0), x)


def test_linear_and_losses_match_finite_differences():
    rng = np.random.default_rng(1)
    targets = np.array([[0, 2], [1, 1]])

    def build(x, w, b):
        logits = gelu(x @ w + b)
        return cross_entropy(logits, targets) + mse_loss(logits, Tensor(np.zeros((2, 2, 3))))

    check_graph(
        build, rng.standard_normal((2, 2, 4)), rng.standard_normal((4, 3)), rng.standard_normal(3)
    )


def test_linear_module_gradients_through_the_engine():
    case = oracle.load(__file__).case("linear_ce")  # PyTorch's F.cross_entropy(x @ w + b)
    with precision(np.float64):
        layer = Linear(4, 3)
        layer.weight.data, layer.bias.data = case["weight"].copy(), case["bias"].copy()
        cross_entropy(layer(Tensor(case["x"])), case["targets"]).backward()
    np.testing.assert_allclose(layer.weight.grad, case["grad_weight"], rtol=1e-10)
    np.testing.assert_allclose(layer.bias.grad, case["grad_bias"], rtol=1e-10)


def test_mlp_training_step_keeps_float32():
    np.random.seed(0)
    model = Sequential(Linear(3, 8), Linear(8, 2))
    loss = cross_entropy(gelu(model(Tensor(np.ones((4, 3))))), np.array([0, 1, 1, 0]))
    loss.backward()
    for p in model.parameters():
        assert p.grad is not None and p.grad.dtype == np.float32 and p.grad.shape == p.shape
