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
# # Module 02 — Activations
#
# A stack of linear layers is still one linear map: `(x @ A) @ B = x @ (A @ B)`. Putting a
# nonlinear function between the layers is what lets a network bend its decision boundaries. This
# module writes the five activations a GPT-style network needs:
#
# | name | forward | derivative |
# |---|---|---|
# | ReLU | max(x, 0) | 1 where x > 0, else 0 |
# | Sigmoid | σ(x) = 1 / (1 + e⁻ˣ) | σ(x)(1 − σ(x)) |
# | Tanh | tanh(x) | 1 − tanh²(x) |
# | GELU | ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³) | see below |
# | Softmax | eˣⁱ / Σⱼ eˣʲ along one axis | s ⊙ (g − Σ g ⊙ s) |
#
# **Fused functions.** Each activation is one `Function` with its forward and backward side by
# side. Built from `exp`, `add` and `div` tensors instead, softmax would record five graph nodes
# and keep five full-size arrays alive until the backward pass; fused, it keeps one (its output)
# and its backward is two lines.
#
# **Numerical stability.** `exp(1000)` overflows float32. Sigmoid therefore only ever takes the
# exponential of `-|x|` (which lies in (0, 1]), and softmax subtracts each row's maximum first:
# the result is unchanged (the factor e⁻ᵐᵃˣ cancels) and the largest exponent becomes e⁰ = 1.
#
# **GELU.** GPT-2 uses the tanh approximation of `x·Φ(x)` (Φ the normal CDF), and so do we, in the
# forward *and* in the backward: the backward differentiates the approximation itself, so a
# finite-difference check of our own forward agrees with it exactly. PyTorch calls this form
# `gelu(x, approximate="tanh")`. With t = tanh(u):
#
# d/dx GELU(x) = ½(1 + t) + ½x(1 − t²) · √(2/π)(1 + 3·0.044715·x²)

# %%
#| default_exp core.activations

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import math

import numpy as np

from tinytorch.core.tensor import Function, ShapeError, Tensor

GELU_SCALE = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def _dim_or_axis(name: str, dim, axis) -> int:
    """The axis a function was given as PyTorch's `dim=` or numpy's `axis=` (default: the last)."""
    if dim is not None and axis is not None and dim != axis:
        raise ValueError(f"{name}: dim={dim} and axis={axis} disagree; give one of them")
    return -1 if dim is None and axis is None else dim if dim is not None else axis


# %% [markdown]
# ## ReLU, Sigmoid and Tanh
#
# Save for the backward whatever makes it cheapest: for all three that is the *output*, because
# each derivative can be written in terms of it. Keep the input's dtype: multiply by Python
# numbers, never by float64 numpy scalars.


# %% nbgrader={"grade": false, "grade_id": "pointwise", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class ReLUFunction(Function):
    """max(x, 0) elementwise."""

    def forward(self, x):
        ### BEGIN SOLUTION
        self.out = np.maximum(x, 0)
        return self.out
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (grad * (self.out > 0),)
        ### END SOLUTION


class SigmoidFunction(Function):
    """1 / (1 + exp(-x)), without overflow for large |x|."""

    def forward(self, x):
        ### BEGIN SOLUTION
        e = np.exp(-np.abs(x))  # in (0, 1]: never overflows
        self.out = np.where(x >= 0, 1, e) / (1 + e)
        return self.out
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (grad * self.out * (1 - self.out),)
        ### END SOLUTION


class TanhFunction(Function):
    """tanh(x) elementwise."""

    def forward(self, x):
        ### BEGIN SOLUTION
        self.out = np.tanh(x)
        return self.out
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (grad * (1 - self.out * self.out),)
        ### END SOLUTION


# %% [markdown]
# ## GELU
#
# Save `x` and `t = tanh(u)`; the backward formula above needs both.


# %% nbgrader={"grade": false, "grade_id": "gelu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class GELUFunction(Function):
    """GELU, tanh approximation (GPT-2's), in forward and backward alike."""

    def forward(self, x):
        ### BEGIN SOLUTION
        u = GELU_SCALE * (x + GELU_CUBIC * x * x * x)  # x*x*x: numpy's float32 x**3 is slow
        self.x, self.t = x, np.tanh(u)
        out = 0.5 * x * (1 + self.t)
        return out
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        x, t = self.x, self.t
        du = GELU_SCALE * (1 + 3 * GELU_CUBIC * x * x)  # du/dx
        slope = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * du
        return (grad * slope,)
        ### END SOLUTION


# %% [markdown]
# ## Softmax
#
# Along `axis`: subtract the maximum, exponentiate, divide by the sum. For the backward, with s
# the output and g the incoming gradient, the Jacobian-vector product collapses to
# `s * (g - sum(g * s, axis))`: no n×n Jacobian is ever built.
#
# Module 12 blocks attention with -inf scores, and a row may be blocked everywhere (a query that
# may see no key). Its maximum is -inf and `-inf - (-inf)` is nan, so such a row uses 0 as its
# maximum instead and comes out all zeros: no weight anywhere, and a zero gradient.


# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_axis(axis, ndim: int, name: str) -> int:
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < max(ndim, 1):
        raise ShapeError(
            f"{name}: axis {axis!r} is out of range for an input with {ndim} dimensions; "
            f"use an axis in [-{ndim}, {ndim - 1}]"
        )
    return int(axis)


class SoftmaxFunction(Function):
    """exp(x) / sum(exp(x)) along `axis`, shifted by the maximum for stability."""

    def forward(self, x, axis=-1):
        if x.ndim == 0:
            raise ShapeError("softmax needs at least one dimension, got a scalar")
        self.axis = _check_axis(axis, x.ndim, "softmax")
        ### BEGIN SOLUTION
        peak = x.max(axis=self.axis, keepdims=True)  # largest value becomes exp(0) = 1
        peak = np.where(np.isneginf(peak), 0, peak)  # a row of -inf: exp(-inf) = 0, not nan
        e = np.exp(x - peak)
        total = e.sum(axis=self.axis, keepdims=True)
        self.out = e / np.where(total == 0, 1, total)  # a row of -inf stays all zeros
        return self.out
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        s = self.out
        return (s * (grad - (grad * s).sum(axis=self.axis, keepdims=True)),)
        ### END SOLUTION


# %% [markdown]
# ## Functions and layer classes
#
# The functions wrap `Function.apply`; the classes hold no parameters, only the softmax axis, and
# make an activation usable as a layer (`self.gelu = GELU()` in an MLP).


# %% nbgrader={"grade": false, "grade_id": "wrappers", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def relu(x) -> Tensor:
    """max(x, 0) elementwise."""
    return ReLUFunction.apply(_tensor(x))


def sigmoid(x) -> Tensor:
    """Logistic sigmoid, stable for large |x|."""
    return SigmoidFunction.apply(_tensor(x))


def tanh(x) -> Tensor:
    """Hyperbolic tangent."""
    return TanhFunction.apply(_tensor(x))


def gelu(x) -> Tensor:
    """GELU, tanh approximation (PyTorch's `gelu(x, approximate="tanh")`)."""
    return GELUFunction.apply(_tensor(x))


def softmax(x, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """Softmax along `dim` (or `axis`, numpy's word; default the last), stable for large inputs."""
    return SoftmaxFunction.apply(_tensor(x), axis=_dim_or_axis("softmax", dim, axis))


class Activation:
    """A parameter-free layer: `layer(x)` is `layer.forward(x)`."""

    def __call__(self, x) -> Tensor:
        return self.forward(x)

    def parameters(self) -> list:
        return []

    def __repr__(self):
        return f"{type(self).__name__}()"


class ReLU(Activation):
    def forward(self, x) -> Tensor:
        return relu(x)


class Sigmoid(Activation):
    def forward(self, x) -> Tensor:
        return sigmoid(x)


class Tanh(Activation):
    def forward(self, x) -> Tensor:
        return tanh(x)


class GELU(Activation):
    def forward(self, x) -> Tensor:
        return gelu(x)


class Softmax(Activation):
    def __init__(self, dim: int | None = None, *, axis: int | None = None):
        self.axis = _dim_or_axis("Softmax", dim, axis)

    def forward(self, x) -> Tensor:
        return softmax(x, axis=self.axis)

    def __repr__(self):
        return f"Softmax(axis={self.axis})"


# %% [markdown]
# ## Try it

# %%
x = Tensor([-3.0, -0.5, 0.0, 0.5, 3.0])
print(relu(x), sigmoid(x), gelu(x), softmax(x), sep="\n")

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


def forward_backward(function, x, grad, **options):
    """A Function's output on x and its input gradient for `grad`, called directly."""
    fn = function()
    fn.needs_grad = (True,)
    out = fn.forward(x, **options)
    return out, fn.backward(grad)[0]


# %% nbgrader={"grade": true, "grade_id": "test-pointwise", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="pointwise")
def test_pointwise_values(rng):
    x = (rng.normal(scale=2.0, size=(3, 5))).astype(np.float32)
    g = rng.normal(size=x.shape).astype(np.float32)
    np.testing.assert_array_equal(relu(x).data, np.maximum(x, 0))
    np.testing.assert_allclose(sigmoid(x).data, 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tanh(x).data, np.tanh(x), rtol=1e-5, atol=1e-6)
    big = sigmoid(np.array([-1000.0, 1000.0], dtype=np.float32)).data
    np.testing.assert_array_equal(big, [0.0, 1.0])
    assert sigmoid(x).dtype == np.float32
    found = {}
    for name, function in [("relu", ReLUFunction), ("sigmoid", SigmoidFunction),
                           ("tanh", TanhFunction)]:  # fmt: skip
        found[name], found[f"d{name}"] = forward_backward(function, x, g)
    return found


# %% nbgrader={"grade": true, "grade_id": "test-gelu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-6, grades="gelu")
def test_gelu_value_and_slope(rng):
    # float32: where GELU's tail cancels (1 + tanh(u) near 0) its error is about |x| * 1e-7
    x = rng.normal(scale=2.0, size=(4, 6))
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(gelu(x).data, want, rtol=1e-6, atol=1e-6)
    fn = GELUFunction()
    fn.forward(np.array([0.0]))
    slope = fn.backward(np.array([1.0]))[0]  # at 0 it is 1/2
    np.testing.assert_allclose(slope, [0.5], rtol=1e-6, atol=1e-6)
    y, dx = forward_backward(GELUFunction, x, rng.normal(size=x.shape))
    return {"y": y, "dx": dx}


# %% nbgrader={"grade": true, "grade_id": "test-softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9, grades="softmax")
def test_softmax_rows_and_stability(rng):
    x = np.array([[1.0, 2.0, 3.0], [1e4, 1e4, 0.0]], dtype=np.float32)
    s = softmax(x).data
    np.testing.assert_allclose(s.sum(axis=-1), [1.0, 1.0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(s[1], [0.5, 0.5, 0.0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        softmax(x, axis=0).data.sum(axis=0), np.ones(3), rtol=1e-6, atol=1e-9
    )
    fn = SoftmaxFunction()
    out = fn.forward(np.array([0.3, -1.0, 2.0]))
    (g,) = fn.backward(np.ones(3))  # softmax sums to 1, so a uniform gradient vanishes
    np.testing.assert_allclose(g, np.zeros(3), atol=1e-9)
    assert out.argmax() == 2
    z = rng.normal(scale=3.0, size=(2, 4, 5))
    last, dlast = forward_backward(SoftmaxFunction, z, rng.normal(size=z.shape))
    middle, dmiddle = forward_backward(SoftmaxFunction, z, rng.normal(size=z.shape), axis=1)
    return {"last": last, "dlast": dlast, "middle": middle, "dmiddle": dmiddle,
            "stable": softmax(x * 10).data}  # fmt: skip
