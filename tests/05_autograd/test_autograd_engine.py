"""Module 05: the backward engine, checked by finite differences, PyTorch and call counts."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import oracle
import pytest
from fdcheck import check_graph

from tinytorch.core.autograd import (
    RELEASED,
    backward,
    no_grad,
    numerical_gradient,
    topological_order,
)
from tinytorch.core.tensor import Function, Tensor


def test_composite_graph_matches_finite_differences():
    rng = np.random.default_rng(0)

    def build(x, w, b):
        h = (x @ w + b) * x.mean(axis=-1, keepdims=True)
        return (h / (1.0 + h * h)).max(axis=0) - h.sum(axis=0) ** 2 * 0.1

    check_graph(
        build, rng.standard_normal((4, 3)), rng.standard_normal((3, 3)), rng.standard_normal(3)
    )


def test_indexing_reshape_and_transpose_gradients():
    rng = np.random.default_rng(1)

    def build(x):
        y = x.reshape(3, 4).transpose()[np.array([0, 2, 2])]
        return y.exp().log() * y

    check_graph(build, rng.uniform(0.5, 1.5, size=(2, 6)))


def test_matches_torch_on_a_shared_graph():
    case = oracle.load(__file__).case("shared")  # PyTorch's gradients of the same graph
    x, w = case["x"], case["w"]
    tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    y = tx @ tw
    loss = (y * y + y).mean() + (tx**2).sum() * 0.01
    loss.backward()
    np.testing.assert_allclose(tx.grad, case["grad_x"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tw.grad, case["grad_w"], rtol=1e-5, atol=1e-6)


class Counted(Function):
    calls = 0

    def forward(self, a):
        return a * 0.5

    def backward(self, grad):
        Counted.calls += 1
        return (grad * 0.5,)


@pytest.mark.parametrize("depth", [2, 4, 8, 12])
def test_residual_chain_visits_each_node_once(depth):
    Counted.calls = 0
    x = Tensor(np.ones(3), requires_grad=True)
    h = x
    for _ in range(depth):
        h = h + Counted.apply(h)
    nodes = len(topological_order(h))
    h.sum().backward()
    assert Counted.calls == depth  # one backward per node: linear, not exponential
    assert nodes == 2 * depth + 1
    np.testing.assert_allclose(x.grad, np.full(3, 1.5**depth), rtol=1e-6)


def test_intermediates_keep_no_grad_and_graph_is_released():
    x = Tensor(np.ones(2), requires_grad=True)
    y = x * 3
    z = y.sum()
    z.backward()
    assert y.grad is None and z.grad is None
    assert y._ctx is RELEASED and z._ctx is RELEASED  # the functions and their arrays let go
    assert not y.is_leaf and not z.is_leaf
    np.testing.assert_allclose(x.grad, [3.0, 3.0])


def test_a_second_backward_through_a_released_graph_raises_like_torch():
    torch = oracle.load(__file__).case("freed")
    a = Tensor([1.0, 2.0], requires_grad=True)
    y = (a * a).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time.*run the forward again") as again:
        y.backward()
    assert torch["again_raises"] and "\n" not in str(again.value)
    h = a * a
    h.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        (h * 3).sum().backward()  # a new graph on top of a released node
    assert torch["through_raises"] and y.is_leaf == h.is_leaf == bool(torch["used_is_leaf"])
    assert y.grad is None and h.grad is None  # no used node was taken for a parameter
    np.testing.assert_array_equal(a.grad, torch["grad_a"])
    (a * a).sum().backward()  # the forward again: a fresh graph works
    np.testing.assert_array_equal(a.grad, torch["grad_a"] + [2.0, 4.0])


def test_gradients_reach_only_the_elements_a_mask_selects():
    x = Tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
    (x[x > 0] * Tensor([1.0, 10.0])).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 0.0, 10.0])


def test_vector_dot_product_backward():
    a, b = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([4.0, 5.0, 6.0], requires_grad=True)
    (a @ b).backward()
    np.testing.assert_array_equal(a.grad, b.data)
    np.testing.assert_array_equal(b.grad, a.data)
    rng = np.random.default_rng(4)
    check_graph(lambda u, v: (u @ v) * u, rng.standard_normal(5), rng.standard_normal(5))


def test_power_zero_through_the_engine():
    a = Tensor([0.0, 1.0], requires_grad=True)
    (a**0).sum().backward()
    np.testing.assert_array_equal(a.grad, [0.0, 0.0])


def test_gradients_accumulate_over_backward_calls():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (x * x).sum().backward()
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad, 2 * np.array([1.0, 2.0]) + 2)


def test_shared_input_leaves_do_not_share_gradient_arrays():
    a, b = Tensor(np.ones(2), requires_grad=True), Tensor(np.ones(2), requires_grad=True)
    (a + b).sum().backward()
    a.grad += 1
    np.testing.assert_allclose(b.grad, [1.0, 1.0])


def test_gradients_stay_float32():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    (x * np.float64(2.0) + 1.0).mean().backward()
    assert x.grad.dtype == np.float32


def test_no_grad_records_nothing_and_restores():
    w = Tensor(np.ones(3), requires_grad=True)
    with no_grad():
        y = w * 2
    assert not y.requires_grad and y._ctx is None
    assert (w * 2).requires_grad

    @no_grad()
    def infer(t):
        return t * 2

    assert not infer(w).requires_grad


def test_errors_are_clear():
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor(np.ones(2)).sum().backward()
    x = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match="single value"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="grad shape"):
        backward(x * 2, np.ones(3))


def test_numerical_gradient_of_a_known_function():
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(
        numerical_gradient(lambda: float(np.sum(np.sin(x))), x), np.cos(x), rtol=1e-7
    )


def test_importing_later_modules_replaces_no_tensor_method():
    import tinytorch

    # A fresh interpreter: snapshot Tensor's attributes, import modules 02-05, compare.
    code = (
        "import json\n"
        "from tinytorch.core.tensor import Tensor\n"
        "before = {k: id(v) for k, v in vars(Tensor).items()}\n"
        "import tinytorch.core.activations, tinytorch.core.layers\n"
        "import tinytorch.core.losses, tinytorch.core.autograd\n"
        "after = {k: id(v) for k, v in vars(Tensor).items()}\n"
        "print(json.dumps(sorted(k for k in before.keys() | after.keys()"
        " if before.get(k) != after.get(k))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(tinytorch.__file__).resolve().parent.parent)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []


def test_no_grad_as_a_decorator_keeps_the_signature_and_docstring():
    import inspect

    def scale(x, factor: float = 2.0, *, bias=None):
        """Scale x."""
        return x * factor

    wrapped = no_grad()(scale)
    assert inspect.signature(wrapped) == inspect.signature(scale)
    assert wrapped.__doc__ == "Scale x." and wrapped.__wrapped__ is scale


def test_enable_autograd_exists_and_changes_nothing():
    """Issue 38: the reference course's learners call enable_autograd(); here it is a no-op."""
    import tinytorch
    from tinytorch.core.autograd import enable_autograd

    assert (
        tinytorch.enable_autograd is enable_autograd and "Nothing to do" in enable_autograd.__doc__
    )
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    assert enable_autograd() is None
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])
