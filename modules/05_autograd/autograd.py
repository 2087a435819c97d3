# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Module 05 — Autograd
#
# Every operation you wrote so far records, on its output, the `Function` that made it and that
# function's inputs. Those records form a graph from the parameters to the loss. Backpropagation is
# the chain rule applied to that graph, in an order where a node is processed only after every
# node that uses it:
#
# 1. **Sort once.** Walk from the loss to the leaves and list the nodes in topological order
#    (each node after all of its inputs). Do it with an explicit stack, not recursion: a deep
#    network would overflow Python's recursion limit, and a recursive walk that follows every edge
#    separately revisits shared subgraphs exponentially often in residual networks.
# 2. **Walk backwards.** Start with gradient 1 for the loss. For each node in reverse order, ask
#    its function for the gradient of each input, reduce it to the input's shape (`sum_to_shape`
#    undoes broadcasting), and *add* it to that input's running total: a tensor used twice
#    receives two contributions.
# 3. **Keep only what was asked for.** Leaves (tensors you created with `requires_grad=True`) get
#    `.grad`; intermediate results do not, and the graph is released so its saved arrays free.
#
# `no_grad()` switches recording off: inference then builds no graph at all and keeps no
# activations alive.

# %%
#| default_exp core.autograd

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import functools

import numpy as np

from tinytorch.core.tensor import Function, Tensor, _GradMode, sum_to_shape

# %% [markdown]
# ## Step 1: topological order
#
# Return the tensors that `root` depends on through recorded functions, each listed after all of
# its inputs, `root` last. Each tensor appears once. Use an explicit stack of `(tensor, visited)`
# pairs: push a node unvisited; when you pop it unvisited, push it again as visited and then push
# its parents; when you pop it visited, append it to the order.


# %% nbgrader={"grade": false, "grade_id": "toposort", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def topological_order(root: Tensor) -> list[Tensor]:
    """Tensors reachable from `root` through the graph, inputs before the tensors using them."""
    order: list[Tensor] = []
    seen: set[int] = set()
    ### BEGIN SOLUTION
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if node._ctx is not None:
            for parent in node._ctx.parents:
                if parent.requires_grad and id(parent) not in seen:
                    stack.append((parent, False))
    ### END SOLUTION
    return order


# %% [markdown]
# ## Step 2: the backward walk
#
# `grads` maps `id(tensor)` to the gradient accumulated so far. For each node from the end of the
# order: take its total gradient; if it is a leaf, add it to `.grad` (copying the first time, so no
# two leaves share an array); otherwise call `node._ctx.backward(total)` and, for every parent that
# requires a gradient, reduce the returned gradient with `sum_to_shape` and add it to the parent's
# total. Gradients keep the tensor's dtype (a float64 scalar must not turn float32 work into
# float64).
#
# Once a node's function has been used, set `node._ctx = RELEASED` (given below). The function
# and the arrays it saved can then be freed, yet the node still is no leaf: a second backward
# through it raises a clear error instead of quietly treating it as a parameter.


# %% nbgrader={"grade": false, "grade_id": "released", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
class Released(Function):
    """Stands in for a function whose saved arrays a backward has freed."""

    def backward(self, grad):
        raise RuntimeError(
            "backward() through a graph a second time: the first backward freed its saved "
            "arrays; run the forward again, or add the losses and call backward once"
        )


RELEASED = Released()


# %% nbgrader={"grade": false, "grade_id": "backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def backward(root: Tensor, grad=None) -> None:
    """Backpropagate from `root`, accumulating `.grad` on every leaf that requires it."""
    if not root.requires_grad:
        raise RuntimeError(
            "backward() on a tensor that does not require grad; create the parameters with "
            "requires_grad=True and do not call backward inside no_grad()"
        )
    if grad is None:
        if root.size != 1:
            raise RuntimeError(
                f"backward() without a gradient needs a single value, got shape {root.shape}; "
                "reduce it first (e.g. .sum() or .mean()) or pass grad="
            )
        grad = np.ones_like(root.data)
    grad = np.asarray(grad.data if isinstance(grad, Tensor) else grad, dtype=root.dtype)
    if grad.shape != root.shape:
        raise RuntimeError(f"backward(): grad shape {grad.shape} does not match {root.shape}")
    grads = {id(root): grad}
    ### BEGIN SOLUTION
    for node in reversed(topological_order(root)):
        total = grads.pop(id(node), None)
        if total is None:
            continue
        if total.dtype != node.data.dtype:
            total = total.astype(node.data.dtype)
        fn = node._ctx
        if fn is None:
            if node.grad is None:
                node.grad = np.array(total, copy=True)
            else:
                node.grad += total
            continue
        for parent, g in zip(fn.parents, fn.backward(total)):
            if g is None or not parent.requires_grad:
                continue
            g = sum_to_shape(g, parent.shape)
            key = id(parent)
            grads[key] = g if key not in grads else grads[key] + g
        node._ctx = RELEASED  # frees the saved arrays; a second backward here raises
    ### END SOLUTION


# %% [markdown]
# ## Switching recording off


# %% nbgrader={"grade": false, "grade_id": "no-grad", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
class no_grad:
    """Context manager (and decorator) that records no graph: for inference and updates."""

    def __enter__(self):
        self.previous = _GradMode.enabled
        _GradMode.enabled = False

    def __exit__(self, *exc):
        _GradMode.enabled = self.previous

    def __call__(self, func):
        @functools.wraps(func)  # keeps the signature and docstring for help() and Shift-Tab
        def wrapper(*args, **kwargs):
            with no_grad():
                return func(*args, **kwargs)

        return wrapper


def enable_autograd() -> None:
    """Nothing to do: tinytorch records the graph from the moment this module is in the package.

    Some courses patch the Tensor class when their learner calls `enable_autograd()`; here
    `Tensor.backward` finds this module's engine by itself, so the call does nothing and code
    written for those courses runs unchanged. `no_grad()` is the switch that does something.
    """


# %% [markdown]
# ## Checking gradients numerically
#
# A central difference `(f(x + h) - f(x - h)) / 2h` approximates each partial derivative with an
# error of order h². It is slow (two evaluations per input number) but independent of any backward
# rule, which makes it the referee for every gradient in this course. Run it in float64: in
# float32 the rounding error of `f` divided by a small `h` swamps the answer.


# %% nbgrader={"grade": false, "grade_id": "numerical", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def numerical_gradient(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central-difference gradient of the scalar function `f` at array `x` (changed in place)."""
    grad = np.zeros_like(x)
    ### BEGIN SOLUTION
    flat, out = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + h
        upper = f()
        flat[i] = keep - h
        lower = f()
        flat[i] = keep
        out[i] = (upper - lower) / (2 * h)
    ### END SOLUTION
    return grad


# %% [markdown]
# ## Try it: a residual chain
#
# `h = h + f(h)` twelve times. Each node is visited once, so the work grows linearly with depth.

# %%
x = Tensor(np.ones((2, 3)), requires_grad=True)
h = x
for _ in range(12):
    h = h + h * 0.5
backward(h.sum())
print(x.grad[0, 0], 1.5**12)

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


# %% nbgrader={"grade": true, "grade_id": "test-chain-rule", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9, grades="backward")
def test_chain_rule_and_accumulation(rng):
    a = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    b = Tensor(np.array([4.0, 5.0, 6.0]), requires_grad=True)
    y = (a * b + a).sum()  # a is used twice: dy/da = b + 1
    backward(y)  # this notebook's engine (Tensor.backward() would call the installed package)
    np.testing.assert_allclose(a.grad, b.data + 1, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(b.grad, a.data, rtol=1e-6, atol=1e-9)
    try:  # the graph was released: going through it again is an error, not a silent no-op
        backward(y)
    except RuntimeError:
        assert not y.is_leaf and y.grad is None
    else:
        raise AssertionError("a second backward through the same graph must raise")
    c = Tensor(np.ones((2, 3)), requires_grad=True)
    backward((c + Tensor(np.ones(3))).sum())  # broadcast add
    assert c.grad.shape == (2, 3)
    x = Tensor(rng.normal(size=(3, 4)), requires_grad=True)
    w = Tensor(rng.normal(size=(4, 2)), requires_grad=True)
    bias = Tensor(rng.normal(size=2), requires_grad=True)
    h = x @ w + bias  # bias broadcast over rows; h used twice below
    out = h * h + h * x.sum(axis=-1, keepdims=True)
    backward(out, rng.normal(size=out.shape))
    first = x.grad.copy()
    backward((x * 2.0).sum())  # a second backward adds to .grad
    np.testing.assert_allclose(x.grad, first + 2.0, rtol=1e-6, atol=1e-9)
    return {"da": a.grad, "db": b.grad, "dx": x.grad, "dw": w.grad, "dbias": bias.grad}


# %% nbgrader={"grade": true, "grade_id": "test-toposort", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-9, grades="toposort")
def test_topological_order_lists_each_node_once(rng):
    x = Tensor(np.ones(2), requires_grad=True)
    h = x
    for _ in range(6):
        h = h + h * 0.5
    order = topological_order(h)
    assert order[-1] is h and order[0] is x
    assert len(order) == len({id(t) for t in order}) == 13
    nodes = [Tensor(rng.normal(size=2), requires_grad=True)]
    for _ in range(int(rng.integers(6, 12))):  # a random graph: nodes reused, some unused
        i, j = rng.integers(0, len(nodes), size=2)
        nodes.append(nodes[i] * 0.5 + nodes[j])
    order = topological_order(nodes[-1])
    where = {id(t): k for k, t in enumerate(order)}
    assert len(where) == len(order) and order[-1] is nodes[-1]
    for t in order:  # every input stands before the tensors that use it
        for parent in t._ctx.parents if t._ctx is not None else ():
            assert not parent.requires_grad or where[id(parent)] < where[id(t)]
    values = np.sort([float(t.data.sum()) for t in order])
    return {"count": np.array(len(order)), "values": values}


# %% nbgrader={"grade": true, "grade_id": "test-numerical", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-8, grades="numerical")
def test_numerical_gradient(rng):
    x = np.array([0.5, -1.0, 2.0])
    g = numerical_gradient(lambda: float(np.sum(x**3)), x)
    np.testing.assert_allclose(g, 3 * x**2, rtol=1e-6, atol=1e-8)
    y = rng.normal(size=(2, 3))
    start = y.copy()
    g = numerical_gradient(lambda: float(np.sum(np.sin(y) * y**2)), y)
    np.testing.assert_allclose(g, np.cos(y) * y**2 + 2 * y * np.sin(y), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(y, start)  # x is put back as it was
    return {"grad": g, "x": y}


# %% nbgrader={"grade": true, "grade_id": "test-no-grad", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="backward")
def test_no_grad(rng):
    w = Tensor(rng.normal(size=3), requires_grad=True)
    with no_grad():
        y = w * 2
    assert not y.requires_grad and y._ctx is None
    g = rng.normal(size=3)
    backward(w * w, g)  # after the block the graph is recorded again
    np.testing.assert_allclose(w.grad, 2 * w.data * g)
    return {"dw": w.grad, "recorded": np.array([y.requires_grad, (w * 2).requires_grad])}
