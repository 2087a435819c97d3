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
# # Module 03 — Layers
#
# A network is a tree of layers, and most layers own a few tensors they learn (parameters). This
# module builds the container that keeps that tree in order, and the first real layer.
#
# **`Module`** finds its parameters by looking at its own attributes: a `Tensor` with
# `requires_grad=True` is a parameter, another `Module` is a child to search, and lists, tuples and
# dicts of those are searched too (a GPT keeps its blocks in a plain list). Python keeps attribute
# order, so `parameters()` returns the same order on every run; the optimizer and the saved
# checkpoint both rely on that. Each parameter also gets a dotted name, such as
# `blocks.0.attention.q_proj.weight`, which is what `state_dict()` saves under.
#
# `Module` needs no `__init__` of its own: a subclass may skip `super().__init__()` and everything
# still works, because the search reads the instance's attributes when asked and `training`
# defaults to `True` on the class.
#
# **`Linear`** computes `y = x @ W + b` with `W` of shape `(in_features, out_features)`: the input's
# last axis meets the weight's first, so no transpose is needed. (PyTorch stores the transpose,
# `(out, in)`.) Weights start uniform in `±1/sqrt(in_features)`, PyTorch's default, which keeps the
# output's scale close to the input's.
#
# **Why one fused `Function` for Linear?** Built from `matmul` and `add`, a layer would record two
# graph nodes and keep an extra full-size temporary. As one function it does one matrix multiply
# forward and two backward. A batched input `(B, T, in)` is flattened to `(B*T, in)` first, so
# each product is one large BLAS call instead of B small ones.
#
# | gradient | formula (x flattened to 2-D, g the output gradient) |
# |---|---|
# | input | g @ Wᵀ |
# | weight | xᵀ @ g |
# | bias | g summed over rows |

# %%
#| default_exp core.layers

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tinytorch.core.hooks import listeners, run_module
from tinytorch.core.tensor import Function, ShapeError, Tensor

# %% [markdown]
# ## `Module`: finding parameters
#
# `_members` lists an object's direct members with their names: attributes first, in the order
# they were set, and inside a list or dict its items, named by index or key. `named_parameters`
# walks that tree depth first, in attribute order, and yields every trainable tensor once (a
# weight shared by two layers is listed under its first name only, so an optimizer never updates
# it twice; a module reachable twice is searched once).
#
# Some layers keep arrays they learn from the data but not by gradients, such as module 09's
# `BatchNorm2d` running statistics. As in PyTorch, such a layer calls
# `self.register_buffer("running_mean", array)`: a buffer is not a parameter (the optimizer never
# sees it), but `state_dict()` saves it and `load_state_dict()` restores it in place, under its
# dotted name (`layers.1.running_mean`), so a reloaded model predicts exactly as the saved one.
# The given code handles the buffers: in `state_dict` you build `state`, the dict of the
# parameters' copies, and the given lines add the buffers to it and return it.


# %% nbgrader={"grade": false, "grade_id": "module", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _members(value, prefix: str) -> Iterator[tuple[str, object]]:
    """(dotted name, object) for each Tensor or Module directly inside `value`'s containers."""
    if isinstance(value, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        items = ((str(k), v) for k, v in value.items())
    else:
        return
    for key, item in items:
        name = f"{prefix}.{key}"
        if isinstance(item, (Tensor, Module)):
            yield name, item
        else:
            yield from _members(item, name)


class Module:
    """Base class of every layer: finds parameters, switches train/eval, saves and loads."""

    training = True  # a class default, so subclasses need not call super().__init__()

    def __call__(self, *args, **kwargs):
        if listeners():  # module 14's profiler or tito diagnose is listening
            return run_module(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def children(self) -> Iterator[tuple[str, object]]:
        """Direct members that are Tensors or Modules, with their names, in attribute order."""
        for name, value in vars(self).items():
            if isinstance(value, (Tensor, Module)):
                yield name, value
            else:
                yield from _members(value, name)

    def named_parameters(self) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, tensor) for every trainable tensor, each once, in a stable order."""
        seen: set[int] = set()  # ids of tensors and modules already visited
        ### BEGIN SOLUTION

        def walk(module, prefix):
            for name, value in module.children():
                if id(value) in seen:
                    continue
                if isinstance(value, Module):
                    seen.add(id(value))
                    yield from walk(value, f"{prefix}{name}.")
                elif value.requires_grad:
                    seen.add(id(value))
                    yield prefix + name, value

        seen.add(id(self))
        yield from walk(self, "")
        ### END SOLUTION

    def parameters(self) -> list[Tensor]:
        """Every trainable tensor, each once, in the order of `named_parameters()`."""
        return [p for _, p in self.named_parameters()]

    def modules(self) -> list[Module]:
        """This module and every module below it, each once, depth first."""
        found, seen, stack = [], set(), [self]
        while stack:
            module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            found.append(module)
            kids = [v for _, v in module.children() if isinstance(v, Module)]
            stack.extend(reversed(kids))
        return found

    def train(self, mode: bool = True) -> Module:
        """Set `training` on this module and all below it (Dropout reads it)."""
        ### BEGIN SOLUTION
        for module in self.modules():
            module.training = mode
        ### END SOLUTION
        return self

    def eval(self) -> Module:
        """Switch to inference behaviour (same as `train(False)`)."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Forget every parameter's gradient before the next backward pass."""
        for p in self.parameters():
            p.grad = None

    def num_parameters(self) -> int:
        return sum(p.size for p in self.parameters())

    buffer_names: tuple[str, ...] = ()  # a class default, like `training`

    def register_buffer(self, name: str, value) -> None:
        """Keep the array `value` as attribute `name`, saved and loaded with the parameters."""
        self.buffer_names = (*(n for n in self.buffer_names if n != name), name)
        vars(self)[name] = np.asarray(value)  # as `self.<name> = ...` would

    def own_buffers(self) -> list[tuple[str, np.ndarray]]:
        """(name, array) for the buffers this module registered itself."""
        return [(name, vars(self)[name]) for name in self.buffer_names]

    def named_buffers(self) -> Iterator[tuple[str, np.ndarray]]:
        """(dotted name, array) for every registered buffer here and below, each module once."""
        seen: set[int] = set()

        def walk(module, prefix):
            seen.add(id(module))
            for name, array in module.own_buffers():
                yield prefix + name, array
            for name, value in module.children():
                if isinstance(value, Module) and id(value) not in seen:
                    yield from walk(value, f"{prefix}{name}.")

        yield from walk(self, "")

    def state_dict(self) -> dict[str, np.ndarray]:
        """{dotted name: a copy of the values}: every parameter, then every buffer."""
        ### BEGIN SOLUTION
        state = {name: p.data.copy() for name, p in self.named_parameters()}
        ### END SOLUTION
        state.update((name, np.array(b, copy=True)) for name, b in self.named_buffers())
        return state

    def load_state_dict(self, state: dict) -> None:
        """Copy saved values into the parameters and buffers (in place); names and shapes must
        match."""
        params, buffers = dict(self.named_parameters()), dict(self.named_buffers())
        missing = sorted((set(params) | set(buffers)) - set(state))
        unexpected = sorted(set(state) - set(params) - set(buffers))
        if missing or unexpected:
            raise KeyError(
                f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}; "
                f"the saved weights belong to a different architecture than {type(self).__name__}"
            )

        def saved(name, shape):
            value = np.asarray(state[name])
            if value.shape != shape:
                raise ShapeError(
                    f"load_state_dict: '{name}' has shape {value.shape} in the saved weights but "
                    f"{shape} in the model; build the model with the same sizes"
                )
            return value

        for name, p in params.items():
            value = saved(name, p.shape)
            ### BEGIN SOLUTION
            np.copyto(p.data, value, casting="unsafe")
            ### END SOLUTION
        for name, buffer in buffers.items():
            np.copyto(buffer, saved(name, buffer.shape), casting="unsafe")

    def __repr__(self):
        return f"{type(self).__name__}({self.num_parameters()} parameters)"


Layer = Module  # the TinyTorch book's name for the same base class


# %% [markdown]
# ## `Linear`: one fused function
#
# `forward` flattens every leading axis into rows, multiplies once, adds the bias, and restores
# the leading axes. `backward` does the same flattening on the output gradient. Save only what the
# backward needs: the input for the weight gradient, the weight for the input gradient.


# %% nbgrader={"grade": false, "grade_id": "linear-function", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class LinearFunction(Function):
    """y = x @ weight (+ bias) over the last axis of x, as one node and one GEMM."""

    def forward(self, x, weight, bias=None):
        self.x_shape = x.shape
        ### BEGIN SOLUTION
        rows = x.reshape(-1, weight.shape[0])  # (N, in): all leading axes in one GEMM
        self.rows = rows if self.needs_grad[1] else None
        self.weight = weight if self.needs_grad[0] else None
        self.has_bias = bias is not None
        out = rows @ weight  # (N, out)
        if bias is not None:
            out += bias  # in place: no second (N, out) temporary
        return out.reshape(*x.shape[:-1], weight.shape[1])
        ### END SOLUTION

    def backward(self, grad):
        gx = gw = gb = None
        ### BEGIN SOLUTION
        g = grad.reshape(-1, grad.shape[-1])  # (N, out)
        if self.needs_grad[0]:
            gx = (g @ self.weight.T).reshape(self.x_shape)
        if self.needs_grad[1]:
            gw = self.rows.T @ g
        if self.has_bias and self.needs_grad[2]:
            gb = g.sum(axis=0)
        ### END SOLUTION
        return (gx, gw, gb) if len(self.needs_grad) == 3 else (gx, gw)


# %% nbgrader={"grade": false, "grade_id": "linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


class Linear(Module):
    """y = x @ weight + bias, weight (in_features, out_features), PyTorch's default init."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        for label, n in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
                raise ValueError(f"Linear: {label} must be a positive integer, got {n!r}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        ### BEGIN SOLUTION
        bound = 1.0 / np.sqrt(in_features)
        shape = (in_features, out_features)
        self.weight = Tensor(np.random.uniform(-bound, bound, shape), requires_grad=True)
        self.bias = (
            Tensor(np.random.uniform(-bound, bound, out_features), requires_grad=True)
            if bias
            else None
        )
        ### END SOLUTION

    def forward(self, x) -> Tensor:
        x = _as_tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise ShapeError(
                f"Linear({self.in_features}, {self.out_features}) got input of shape {x.shape}; "
                f"its last axis must be {self.in_features}"
            )
        ### BEGIN SOLUTION
        if self.bias is None:
            return LinearFunction.apply(x, self.weight)
        return LinearFunction.apply(x, self.weight, self.bias)
        ### END SOLUTION

    def __repr__(self):
        bias = self.bias is not None
        return (
            f"Linear(in_features={self.in_features}, out_features={self.out_features}, bias={bias})"
        )


# %% [markdown]
# ## `Dropout` and `Sequential`
#
# Dropout zeroes each value with probability `p` during training. *Inverted* dropout divides the
# survivors by `1 - p` at training time, so the expected value is unchanged and inference is a
# plain identity: nothing to rescale after training. The random mask is drawn outside the
# `Function` and handed to it, so the forward and backward use the same mask and a gradient check
# sees a deterministic function. `Sequential` feeds each layer's output to the next.


# %% nbgrader={"grade": false, "grade_id": "dropout", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class DropoutFunction(Function):
    """x * mask, where mask holds 0 or 1/(1-p)."""

    def forward(self, x, mask):
        ### BEGIN SOLUTION
        self.mask = mask
        return x * mask
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        return (grad * self.mask,)
        ### END SOLUTION


class Dropout(Module):
    """Zero values with probability p while training; identity in eval mode."""

    def __init__(self, p: float = 0.5):
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
            raise ValueError(f"Dropout: p must be a probability in [0, 1), got {p!r}")
        self.p = float(p)

    def forward(self, x) -> Tensor:
        x = _as_tensor(x)
        if not self.training or self.p == 0:
            return x
        ### BEGIN SOLUTION
        keep = np.random.random_sample(x.shape) >= self.p
        mask = keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - self.p))
        return DropoutFunction.apply(x, mask=mask)
        ### END SOLUTION

    def __repr__(self):
        return f"Dropout(p={self.p})"


class Sequential(Module):
    """Layers applied one after another."""

    def __init__(self, *layers):
        for layer in layers:  # PyTorch refuses a list too: the layers are the arguments
            if isinstance(layer, (list, tuple)):
                raise TypeError(
                    "Sequential takes the layers themselves, Sequential(a, b), not a "
                    f"{type(layer).__name__} of them; unpack one with Sequential(*layers)"
                )
            if not callable(layer):
                raise TypeError(f"Sequential: {type(layer).__name__} is not a layer (not callable)")
        self.layers = list(layers)

    def forward(self, x):
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x)
        return x
        ### END SOLUTION

    def __getitem__(self, index):
        return self.layers[index]

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)


# %% [markdown]
# ## Try it

# %%
np.random.seed(0)
net = Sequential(Linear(4, 8), Dropout(0.1), Linear(8, 2))
print(net(np.ones((3, 5, 4))).shape, [name for name, _ in net.named_parameters()])

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


def text_numbers(words) -> np.ndarray:
    """Names as numbers (their UTF-8 bytes, one name a line), so a grader can compare them."""
    return np.frombuffer("\n".join(words).encode(), dtype=np.uint8)


# %% nbgrader={"grade": true, "grade_id": "test-linear", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="linear")
def test_linear_forward(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    layer = Linear(3, 2)
    bound = 1 / np.sqrt(3)
    assert layer.weight.shape == (3, 2) and layer.bias.shape == (2,)
    assert np.all(np.abs(layer.weight.data) <= bound) and np.std(layer.weight.data) > 0
    layer.weight.data = rng.uniform(-bound, bound, size=(3, 2)).astype(np.float32)
    layer.bias.data = rng.normal(size=2).astype(np.float32)
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    y = layer(Tensor(x))
    want = x @ layer.weight.data + layer.bias.data
    assert y.shape == (4, 5, 2) and y.dtype == np.float32
    np.testing.assert_allclose(y.data, want, rtol=1e-5, atol=1e-6)
    plain = Linear(3, 2, bias=False)
    plain.weight.data = layer.weight.data
    return {"y": y.data, "no_bias": plain(Tensor(x)).data}


# %% nbgrader={"grade": true, "grade_id": "test-linear-backward", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-8, grades="linear-function")
def test_linear_backward(rng):
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
    fn = LinearFunction()
    fn.needs_grad = (True, True, True)
    y = fn.forward(x, w, b)
    g = rng.standard_normal((2, 3, 5))
    gx, gw, gb = fn.backward(g)
    np.testing.assert_allclose(gx, g @ w.T, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, np.einsum("bti,bto->io", x, g), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, g.sum(axis=(0, 1)), rtol=1e-6, atol=1e-8)
    return {"y": y, "dx": gx, "dw": gw, "db": gb}


# %% nbgrader={"grade": true, "grade_id": "test-module", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="module")
def test_module_parameters_and_state(rng):
    class Net(Module):  # no super().__init__(), parameters in a plain list
        def __init__(self):
            self.blocks = [Linear(2, 3), Linear(3, 3, bias=False)]
            self.head = Linear(3, 1)

    net = Net()
    for p in net.parameters():
        p.data = rng.normal(size=p.shape).astype(np.float32)
    names = [name for name, _ in net.named_parameters()]
    assert names == [
        "blocks.0.weight",
        "blocks.0.bias",
        "blocks.1.weight",
        "head.weight",
        "head.bias",
    ]
    state = net.state_dict()
    other = Net()
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.head.weight.data, net.head.weight.data)
    assert not net.eval().blocks[0].training and net.train().head.training
    loaded = [p.data for p in other.parameters()]
    return {
        "names": text_numbers(names),
        "count": np.array(net.num_parameters()),
        "loaded": np.concatenate([p.ravel() for p in loaded]),
        "state": np.concatenate([np.ravel(state[name]) for name in names]),
    }


# %% nbgrader={"grade": true, "grade_id": "test-dropout", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="dropout")
def test_dropout_and_sequential(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    p = float(rng.uniform(0.2, 0.6))
    drop = Dropout(p)
    x = Tensor(rng.normal(size=(4, 50)).astype(np.float32))
    y = drop(x)
    kept = y.data != 0
    assert 0 < kept.mean() < 1
    g = rng.normal(size=y.shape).astype(np.float32)
    fn = DropoutFunction()
    mask = np.where(kept, y.data / np.where(kept, x.data, 1), 0).astype(np.float32)
    fn.forward(x.data, mask)
    (dx,) = fn.backward(g)
    np.testing.assert_allclose(dx[~kept], 0)  # dropped values pass no gradient back
    drop.eval()
    np.testing.assert_array_equal(drop(x).data, x.data)  # eval mode: the identity
    first, second = Linear(3, 4), Linear(4, 2)
    for p_ in (*first.parameters(), *second.parameters()):
        p_.data = rng.normal(size=p_.shape).astype(np.float32)
    net = Sequential(first, Dropout(0.5), second).eval()
    z = rng.normal(size=(5, 3)).astype(np.float32)
    # which values are dropped is a random draw: only what every correct draw shares is compared
    return {"scale": np.array([(y.data[kept] / x.data[kept]).mean()]),
            "grad_scale": np.array([(dx[kept] / g[kept]).mean()]),
            "eval": drop(x).data, "sequential": net(Tensor(z)).data}  # fmt: skip
