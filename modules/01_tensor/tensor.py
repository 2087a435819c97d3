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
# # Module 01 — Tensor
#
# Every deep-learning framework is built around one data structure: an n-dimensional array that
# also remembers how it was computed. In this module you build `Tensor`, a thin wrapper over a
# float32 numpy array, and the `Function` protocol every later operation follows.
#
# **Why float32?** Models train fine in single precision, it halves memory against float64, and
# BLAS matrix multiplies run about twice as fast. `Tensor` converts whatever it is given to float32.
# (Gradient checks need more digits: inside `with precision(np.float64):` new tensors are float64.
# Operations therefore take their dtype from their inputs and never hard-code one.)
#
# **Why a `Function` class?** Each operation (add, multiply, matmul, ...) is one small class with a
# `forward` that computes the value from numpy arrays and a `backward` that, given the gradient of
# the output, returns the gradient for each input. The two sit side by side so you read an operation
# and its derivative on one screen. `Function.apply` runs `forward` and, when gradients are wanted,
# records the inputs on the output tensor. Module 05 walks those records backwards (autograd); this
# module only writes the local rules.
#
# A reminder of the local rules you need (g is the gradient arriving from the output):
#
# | op | forward | gradient for a | gradient for b |
# |---|---|---|---|
# | add | a + b | g | g |
# | mul | a * b | g * b | g * a |
# | div | a / b | g / b | -g * a / b² |
# | pow (scalar p) | a ** p | g * p * a^(p-1) | — |
# | matmul | a @ b | g @ bᵀ | aᵀ @ g |
# | sum over axis | Σ a | g broadcast back over that axis | — |
#
# When shapes were broadcast in the forward pass, the gradient has the *output's* shape; the
# engine in module 05 sums it back to each input's shape with `sum_to_shape` (written below).

# %%
#| default_exp core.tensor

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import numpy as np

from tinytorch.core.hooks import listeners, run_forward

DTYPE = np.float32


class ShapeError(ValueError):
    """Raised when operand shapes do not fit; the message names both shapes."""


class _GradMode:
    """Whether operations record the graph; module 05's `no_grad()` switches it off."""

    enabled = True


def is_grad_enabled() -> bool:
    return _GradMode.enabled


class _Precision:
    """The dtype new tensors get: float32, or float64 inside `precision()` for gradient checks."""

    dtype = DTYPE


class precision:
    """`with precision(np.float64): ...` builds float64 tensors, e.g. for finite differences."""

    def __init__(self, dtype):
        self.dtype, self.previous = np.dtype(dtype).type, None

    def __enter__(self):
        self.previous, _Precision.dtype = _Precision.dtype, self.dtype

    def __exit__(self, *exc):
        _Precision.dtype = self.previous


def sum_to_shape(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a broadcast gradient back down to `shape` (undoing numpy broadcasting)."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad


# %% [markdown]
# ## The `Function` protocol
#
# `apply` is the only place a graph edge is made. It converts plain numbers and arrays to tensors,
# runs `forward` on the raw arrays, and wraps the result. If gradient recording is on and any input
# requires a gradient, the output remembers the function (`_ctx`) and the function remembers its
# inputs (`parents`). `needs_grad` tells `forward` which inputs will want a gradient, so it can skip
# saving what `backward` will never use.


# %% nbgrader={"grade": false, "grade_id": "function", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
class Function:
    """One differentiable operation: `forward` on arrays, `backward` to input gradients."""

    parents: tuple = ()
    needs_grad: tuple = ()

    def forward(self, *arrays, **kwargs) -> np.ndarray:
        raise NotImplementedError

    def backward(self, grad: np.ndarray) -> tuple:
        """Return one gradient (or None) per input, each in the output's broadcast shape."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **kwargs) -> Tensor:
        tensors = [x if isinstance(x, Tensor) else Tensor(x) for x in inputs]
        fn, arrays = cls(), [t.data for t in tensors]
        needs = [t.requires_grad for t in tensors] if _GradMode.enabled else ()
        fn.needs_grad = tuple(needs) if any(needs) else (False,) * len(tensors)
        # every operation passes here; listeners (module 14's profiler, diagnose) are rare
        out = Tensor(
            run_forward(fn, arrays, kwargs) if listeners() else fn.forward(*arrays, **kwargs)
        )
        if not any(needs):  # no graph: generation runs through here once per operation
            return out
        fn.parents = tuple(tensors)
        out.requires_grad, out._ctx = True, fn
        return out


def _broadcast_shape(op: str, a: np.ndarray, b: np.ndarray) -> tuple:
    if a.shape == b.shape:  # the common case (residual sums), without numpy's general check
        return a.shape
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(
            f"{op}: shapes {a.shape} and {b.shape} cannot be broadcast together; "
            "make the trailing dimensions equal or 1"
        ) from None


# %% [markdown]
# ## Elementwise arithmetic
#
# Write the forward and backward of each operation. Broadcasting is numpy's: `forward` can simply
# use the numpy operator. `backward` returns gradients in the output's shape (the engine reduces
# them). Keep everything float32: multiply by numpy float32 values or plain Python numbers, which
# numpy keeps in float32.


# %% nbgrader={"grade": false, "grade_id": "elementwise", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Add(Function):
    def forward(self, a, b):
        _broadcast_shape("add", a, b)
        ### BEGIN SOLUTION
        return a + b
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return grad, grad
        ### END SOLUTION


class Sub(Function):
    def forward(self, a, b):
        _broadcast_shape("subtract", a, b)
        ### BEGIN SOLUTION
        return a - b
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return grad, -grad
        ### END SOLUTION


class Mul(Function):
    def forward(self, a, b):
        _broadcast_shape("multiply", a, b)
        ### BEGIN SOLUTION
        self.a, self.b = a, b
        return a * b
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return grad * self.b, grad * self.a
        ### END SOLUTION


class Div(Function):
    def forward(self, a, b):
        _broadcast_shape("divide", a, b)
        ### BEGIN SOLUTION
        self.a, self.b = a, b
        return a / b
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        ga = grad / self.b
        gb = -ga * self.a / self.b if self.needs_grad[1] else None
        return ga, gb
        ### END SOLUTION


class Neg(Function):
    def forward(self, a):
        return -a

    def backward(self, grad):
        return (-grad,)


class Pow(Function):
    def forward(self, a, exponent: float):
        ### BEGIN SOLUTION
        self.a, self.p = a, exponent
        return a**exponent
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        if self.p == 0:  # a**0 is the constant 1: no slope, even at a = 0
            return (np.zeros_like(grad),)
        return (grad * self.p * self.a ** (self.p - 1),)
        ### END SOLUTION


class Exp(Function):
    def forward(self, a):
        ### BEGIN SOLUTION
        self.out = np.exp(a)
        return self.out
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (grad * self.out,)
        ### END SOLUTION


class Log(Function):
    def forward(self, a):
        ### BEGIN SOLUTION
        self.a = a
        return np.log(a)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (grad / self.a,)
        ### END SOLUTION


# %% [markdown]
# ## Matrix multiplication
#
# `a @ b` multiplies the last two axes and broadcasts the rest, like numpy. A 1-D operand is
# treated as a row (on the left) or a column (on the right) and that axis is removed again.
# The shape check comes first so a mistake reads as one line naming both shapes.
#
# The backward is the matrix rule, `ga = g @ bᵀ` and `gb = aᵀ @ g`, on the last two axes. When one
# side was broadcast over batch axes (a `(B, T, C)` input times a `(C, D)` weight), its gradient
# comes out with those axes too: `sum_to_shape` sums them away.


# %% nbgrader={"grade": false, "grade_id": "matmul", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_matmul(a_shape, b_shape):
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ShapeError(
            f"matmul needs arrays with at least 1 dimension, got {a_shape} @ {b_shape}"
        )
    inner_a = a_shape[-1]
    inner_b = b_shape[0] if len(b_shape) == 1 else b_shape[-2]
    if inner_a != inner_b:
        raise ShapeError(
            f"matmul: shapes {a_shape} @ {b_shape} do not fit: the last axis of the left ({inner_a}) "
            f"must equal the second-to-last axis of the right ({inner_b})"
        )


class MatMul(Function):
    def forward(self, a, b):
        _check_matmul(a.shape, b.shape)
        self.a, self.b = a, b
        ### BEGIN SOLUTION
        return a @ b
        ### END SOLUTION

    def backward(self, grad):
        a, b = self.a, self.b
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g = grad[..., None] if b.ndim == 1 else grad  # a 0-d grad (vector @ vector) gets both
        g = g[..., None, :] if a.ndim == 1 else g
        ga = gb = None
        ### BEGIN SOLUTION
        if self.needs_grad[0]:
            ga = sum_to_shape(g @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
        if self.needs_grad[1]:
            gb = sum_to_shape(np.swapaxes(a2, -1, -2) @ g, b2.shape).reshape(b.shape)
        ### END SOLUTION
        return ga, gb


# %% [markdown]
# ## Reductions and shape operations
#
# `sum`, `mean` and `max` take `axis` (an int, a tuple, or None for all) and `keepdims`. Their
# backward spreads the gradient back over the reduced axes: every input of a sum receives the
# whole gradient, every input of a mean `1/n` of it, and for `max` only the winners (ties share).
# `reshape`, `transpose` and indexing only move numbers around, so their backward moves the
# gradient back the same way.


# %% nbgrader={"grade": false, "grade_id": "reductions", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    for ax in axes:
        if not -ndim <= ax < max(ndim, 1):
            raise ShapeError(f"axis {ax} is out of range for a tensor with {ndim} dimensions")
    return tuple(ax % max(ndim, 1) for ax in axes)


def _expand(grad, shape, axes, keepdims):
    """Give a reduced gradient back its reduced axes so it broadcasts against the input."""
    if not keepdims:
        grad = np.expand_dims(grad, axes)
    return np.broadcast_to(grad, shape)


class Sum(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.shape, self.axes, self.keepdims = a.shape, _axes(axis, a.ndim), keepdims
        ### BEGIN SOLUTION
        return np.sum(a, axis=self.axes, keepdims=keepdims)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (_expand(grad, self.shape, self.axes, self.keepdims),)
        ### END SOLUTION


class Mean(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.shape, self.axes, self.keepdims = a.shape, _axes(axis, a.ndim), keepdims
        self.count = int(np.prod([a.shape[i] for i in self.axes])) if a.ndim else 1
        ### BEGIN SOLUTION
        return np.mean(a, axis=self.axes, keepdims=keepdims)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (_expand(grad / self.count, self.shape, self.axes, self.keepdims),)
        ### END SOLUTION


class Max(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.axes, self.keepdims = _axes(axis, a.ndim), keepdims
        if not all(a.shape[i] for i in self.axes):
            raise ShapeError(f"max over an empty axis of {a.shape}; check the tensor is not empty")
        ### BEGIN SOLUTION
        out = np.max(a, axis=self.axes, keepdims=True)
        self.winners = a == out
        return out if keepdims else np.squeeze(out, axis=self.axes)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        if not self.keepdims:
            grad = np.expand_dims(grad, self.axes)
        share = self.winners / self.winners.sum(axis=self.axes, keepdims=True, dtype=grad.dtype)
        return (grad * share,)
        ### END SOLUTION


class Reshape(Function):
    def forward(self, a, shape):
        self.shape = a.shape
        try:
            return a.reshape(shape)
        except ValueError:
            raise ShapeError(
                f"cannot reshape {a.shape} ({a.size} values) into {tuple(shape)}"
            ) from None

    def backward(self, grad):
        return (grad.reshape(self.shape),)


class Permute(Function):
    def forward(self, a, axes):
        self.axes = _axes(axes, a.ndim)  # each in range
        if sorted(self.axes) != list(range(a.ndim)):
            raise ShapeError(f"permute: {tuple(axes)} is not an ordering of {a.ndim} axes")
        return np.transpose(a, self.axes)

    def backward(self, grad):
        return (np.transpose(grad, np.argsort(self.axes)),)


class GetItem(Function):
    def forward(self, a, index):
        self.shape, self.index = a.shape, index
        return a[index]

    def backward(self, grad):
        full = np.zeros(self.shape, dtype=grad.dtype)
        np.add.at(full, self.index, grad)  # repeated indices accumulate
        return (full,)


# %% [markdown]
# ## The `Tensor` class
#
# Operators route through the functions above, so each one is recorded the same way. `.grad`
# stays `None` until module 05's engine fills it; `backward()` calls that engine. Comparisons give
# 0/1 tensors that, used as an index, select: `x[x > 0]` is the positive values of `x`.


# %% nbgrader={"grade": false, "grade_id": "tensor", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def _index(key):
    """A comparison's mask selects (x[x > 0]); any other Tensor index holds positions."""
    if isinstance(key, Tensor):
        if key._mask:
            return key.data.astype(bool)
        positions = key.data.astype(np.int64)
        if not np.array_equal(positions, key.data):
            raise IndexError("a Tensor index holds positions, got fractions; round it first")
        return positions
    if isinstance(key, (float, np.floating)):
        raise TypeError(f"index {key} is a float; positions are ints, e.g. int({key})")
    return tuple(_index(k) for k in key) if isinstance(key, tuple) else key


class Tensor:
    """An n-dimensional float32 array that can record how it was computed."""

    __array_priority__ = 100  # numpy defers to Tensor in `ndarray + Tensor`
    _mask = False  # True for a comparison's result: as an index it selects

    def __init__(self, data, requires_grad: bool = False):
        if isinstance(data, Tensor):
            data = data.data
        try:
            array = np.asarray(data)
            if array.dtype.kind not in "biuf":  # None, text, complex numbers
                raise TypeError
            self.data = array.astype(_Precision.dtype, copy=False)
        except (TypeError, ValueError):
            raise TypeError(
                f"Tensor needs real numbers (a number, list or numpy array), got {data!r:.40}"
            ) from None
        self.requires_grad = requires_grad
        self.grad: np.ndarray | None = None
        self._ctx: Function | None = None  # the Function that produced this tensor

    # --- information (grad_fn, is_leaf: PyTorch's names for the _ctx link) -------------
    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    grad_fn, is_leaf = property(lambda self: self._ctx), property(lambda t: t._ctx is None)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor (one number); use .item() or .size")
        return len(self.data)

    def __bool__(self):  # `if t < 1:` asks one value; many values have no single truth
        if self.size != 1:
            raise ValueError(
                f"the truth of a tensor of shape {self.shape} is ambiguous; "
                "reduce it first (.sum(), .max()) or use .data.any() / .data.all()"
            )
        return bool(self.data.item())

    def __repr__(self):
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({np.array2string(self.data, precision=4, threshold=20)}{grad})"

    def numpy(self) -> np.ndarray:
        return self.data

    def __array__(self, dtype=None, copy=None):
        """`np.asarray(t)` is t's float32 array, not an object array holding the Tensor."""
        if copy:
            return np.array(self.data, dtype=dtype, copy=True)
        return self.data if dtype is None else self.data.astype(dtype, copy=False)

    @property
    def grad(self) -> np.ndarray | None:
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        # PyTorch code assigns tensors to .grad; the engine and optimizers work on arrays
        self._grad = value.data if isinstance(value, Tensor) else value

    def item(self) -> float:
        if self.size != 1:
            raise ValueError(f"item() needs one value, got shape {self.shape}; index or reduce it")
        return float(self.data.item())

    __float__ = item

    def __format__(self, spec):
        return format(self.item(), spec) if self.size == 1 else repr(self)

    # --- arithmetic: `a + b` is Add.apply(a, b), and `2 + a` (reflected) Add.apply(2, a) ----
    def _binary(fn):
        return (lambda a, b: fn.apply(a, b)), (lambda a, b: fn.apply(b, a))

    __add__, __radd__ = _binary(Add)
    __sub__, __rsub__ = _binary(Sub)
    __mul__, __rmul__ = _binary(Mul)
    __truediv__, __rtruediv__ = _binary(Div)
    __matmul__, __rmatmul__ = _binary(MatMul)
    matmul = __matmul__

    def __neg__(self):
        return Neg.apply(self)

    def __pow__(self, exponent):
        if not isinstance(exponent, (int, float)):
            raise TypeError("Tensor ** exponent needs a plain number exponent")
        return Pow.apply(self, exponent=exponent)

    def exp(self):
        return Exp.apply(self)

    def log(self):
        return Log.apply(self)

    def sqrt(self):
        return Pow.apply(self, exponent=0.5)

    # --- reductions ----------------------------------------------------------------------
    def sum(self, axis=None, keepdims=False):
        return Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return Mean.apply(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return Max.apply(self, axis=axis, keepdims=keepdims)

    def var(self, axis=None, keepdims=False):
        centred = self - self.mean(axis=axis, keepdims=True)
        return (centred * centred).mean(axis=axis, keepdims=keepdims)

    def std(self, axis=None, keepdims=False):
        return self.var(axis=axis, keepdims=keepdims).sqrt()

    # --- shape -----------------------------------------------------------------------------
    def reshape(self, *shape):
        shape = (
            tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        )
        return Reshape.apply(self, shape=shape)

    def permute(self, *axes):
        axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return Permute.apply(self, axes=axes)

    def transpose(self, axis0: int = -2, axis1: int = -1):
        """Swap two axes (the last two by default, as for a matrix transpose)."""
        if self.ndim < 2:
            raise ShapeError(f"transpose needs at least 2 dimensions, got shape {self.shape}")
        axes, (axis0, axis1) = list(range(self.ndim)), _axes((axis0, axis1), self.ndim)
        axes[axis0], axes[axis1] = axes[axis1], axes[axis0]
        return Permute.apply(self, axes=tuple(axes))

    T = property(lambda self: self.transpose())

    def __getitem__(self, key):
        return GetItem.apply(self, index=_index(key))

    # --- comparisons (no gradient): 0/1 values, and a mask when used as an index ------------
    def _comparison(op):
        def compare(self, other):
            out = Tensor(op(self.data, other.data if isinstance(other, Tensor) else other))
            out._mask = True
            return out

        return compare

    __eq__, __ne__ = _comparison(np.equal), _comparison(np.not_equal)
    __lt__, __le__ = _comparison(np.less), _comparison(np.less_equal)
    __gt__, __ge__ = _comparison(np.greater), _comparison(np.greater_equal)
    __hash__ = object.__hash__  # defining __eq__ would otherwise make tensors unhashable

    # --- gradients -------------------------------------------------------------------------
    def backward(self, grad=None) -> None:
        """Fill `.grad` of every leaf this tensor depends on (needs module 05, autograd)."""
        try:
            from tinytorch.core.autograd import backward
        except ModuleNotFoundError:
            raise RuntimeError(
                "Tensor.backward() needs the autograd engine from module 05; "
                "run `tito module export 05` or complete that module"
            ) from None
        backward(self, grad)

    def zero_grad(self) -> None:
        self.grad = None

    def detach(self) -> Tensor:
        """The same values, cut from the graph."""
        return Tensor(self.data)


# %% [markdown]
# ## Try it

# %%
a = Tensor([[1.0, 2.0], [3.0, 4.0]])
b = Tensor([10.0, 20.0])
print(a + b, (a @ a).shape, a.sum(axis=0), a.dtype)

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers a grader compares with the reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


def local_grads(cls, arrays, rng, **kwargs):
    """Run one Function's forward, then its backward on a random upstream gradient `g`:
    (its input gradients, g). Module 01 has no engine yet, so this calls backward directly."""
    fn = cls()
    fn.needs_grad = (True,) * len(arrays)
    out = fn.forward(*arrays, **kwargs)
    g = rng.normal(size=np.shape(out)).astype(np.float32)
    return fn.backward(g), g


# %% nbgrader={"grade": true, "grade_id": "test-arithmetic", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="elementwise")
def test_arithmetic_matches_numpy(rng):
    x = rng.normal(size=(2, 3)).astype(np.float32)
    y = (rng.uniform(0.5, 2.0, size=3) * rng.choice([-1.0, 1.0], size=3)).astype(np.float32)
    found = {}
    for name, got, want in [
        ("add", Tensor(x) + Tensor(y), x + y),
        ("sub", Tensor(x) - y, x - y),
        ("scale", 2 * Tensor(x), 2 * x),
        ("div", Tensor(x) / Tensor(y), x / y),
        ("square", Tensor(x) ** 2, x**2),
    ]:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.data, want, rtol=1e-5, atol=1e-6)
        found[name] = got.data
    # each backward, called directly, against its derivative (in the output's shape)
    pos = np.abs(x) + np.float32(0.5)
    for name, cls, arrays, kwargs, derivative in [
        ("add", Add, (x, y), {}, lambda g: (g, g)),
        ("sub", Sub, (x, y), {}, lambda g: (g, -g)),
        ("mul", Mul, (x, y), {}, lambda g: (g * y, g * x)),
        ("div", Div, (x, y), {}, lambda g: (g / y, -g * x / y**2)),
        ("neg", Neg, (x,), {}, lambda g: (-g,)),
        ("pow", Pow, (x,), {"exponent": 3.0}, lambda g: (3 * x**2 * g,)),
        ("exp", Exp, (x,), {}, lambda g: (np.exp(x) * g,)),
        ("log", Log, (pos,), {}, lambda g: (g / pos,)),
    ]:
        grads, g = local_grads(cls, arrays, rng, **kwargs)
        for i, (mine, want) in enumerate(zip(grads, derivative(g))):
            np.testing.assert_allclose(mine, np.broadcast_to(want, g.shape), rtol=1e-5, atol=1e-6)
            found[f"d{name}_input{i}"] = np.broadcast_to(mine, g.shape)
    return found


# %% nbgrader={"grade": true, "grade_id": "test-matmul", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-5, grades="matmul")
def test_matmul_and_errors(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    got = (Tensor(x) @ Tensor(w)).data
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)
    (dx, dw), g = local_grads(MatMul, (x, w), rng)  # the backward, against its derivative
    np.testing.assert_allclose(dx, g @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, np.einsum("btk,btn->kn", x, g), rtol=1e-4, atol=1e-4)
    try:
        Tensor(x) @ Tensor(np.ones((3, 5)))
    except ValueError as err:
        assert "(2, 3, 4)" in str(err) and "(3, 5)" in str(err)
    else:
        raise AssertionError("a matmul shape mismatch must raise")
    return {"xw": got, "dx": dx, "dw": dw}


# %% nbgrader={"grade": true, "grade_id": "test-reductions", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-5, grades="reductions")
def test_reductions(rng):
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    t = Tensor(x)
    total, mean, peak = t.sum(), t.mean(axis=-1, keepdims=True), t.max(axis=(0, 2))
    np.testing.assert_allclose(total.data, x.sum(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.data, x.mean(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(peak.data, x.max(axis=(0, 2)))
    assert t.reshape(6, 4).shape == (6, 4) and t.transpose().shape == (2, 4, 3)
    # each backward spreads the upstream gradient over the reduced axes
    (dsum,), g = local_grads(Sum, (x,), rng, axis=1)
    np.testing.assert_allclose(dsum, np.broadcast_to(g[:, None, :], x.shape), rtol=1e-5, atol=1e-5)
    (dmean,), g = local_grads(Mean, (x,), rng, axis=-1, keepdims=True)
    np.testing.assert_allclose(dmean, np.broadcast_to(g / 4, x.shape), rtol=1e-5, atol=1e-5)
    (dmax,), g = local_grads(Max, (x,), rng, axis=(0, 2))
    winners = x == x.max(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(dmax, winners * g[None, :, None], rtol=1e-5, atol=1e-5)
    # the given shape functions of this cell route each gradient back to where it came from
    (dreshape,), g = local_grads(Reshape, (x,), rng, shape=(4, 6))
    np.testing.assert_array_equal(dreshape, g.reshape(x.shape))
    (dpermute,), g = local_grads(Permute, (x,), rng, axes=(2, 0, 1))
    np.testing.assert_array_equal(dpermute, g.transpose(1, 2, 0))
    (ditem,), g = local_grads(GetItem, (x,), rng, index=(slice(None), [0, 2, 0]))
    found = {"sum": total.data, "mean": mean.data, "max": peak.data}
    return {**found, "dsum": dsum, "dmean": dmean, "dmax": dmax, "dreshape": dreshape,
            "dpermute": dpermute, "ditem": ditem}  # fmt: skip
