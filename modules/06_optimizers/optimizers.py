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
# # Module 06 — Optimizers
#
# Autograd leaves a gradient in every parameter's `.grad`. An optimizer turns those gradients
# into a change of the parameters. You write three:
#
# - **SGD**: step against the gradient, `p -= lr * g`. *Momentum* keeps a running sum of past
#   gradients, `buf = momentum * buf + g`, and steps along it: directions that agree from step
#   to step build up speed, directions that flip sign cancel out.
# - **Adam**: keeps, per number, a running mean of the gradient (`m`, first moment) and of its
#   square (`v`, second moment) and steps by `m / (sqrt(v) + eps)`. Each parameter gets its own
#   effective step size, so badly scaled parameters train together. Both averages start at zero
#   and are therefore too small early on; dividing by `1 - beta**t` undoes that bias.
# - **AdamW**: Adam with *decoupled* weight decay. Adding `wd * p` to the gradient (L2, as SGD and
#   `Adam(weight_decay=...)` do) lets Adam's per-parameter scaling shrink the decay of parameters
#   with large gradients. AdamW instead shrinks every weight directly, `p *= 1 - lr * wd`, before
#   the Adam step. Every GPT since GPT-2 is trained with it.
#
# Each update is written as its formula, in numpy. The one thing done in place is the update of
# the parameter itself, `p.data -= ...`: the model (and anything sharing its weight arrays, such as
# module 18's data-parallel copies) keeps the same array. Multiply by Python floats, never by
# float64 numpy scalars, so everything stays float32 like the parameters.
#
# The update formulas follow `torch.optim` exactly, so the tests can check your steps against it.

# %%
#| default_exp core.optimizers

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import math

import numpy as np

from tinytorch.core.tensor import Tensor

# %% [markdown]
# ## The `Optimizer` base class
#
# The base class holds what every optimizer shares: the parameter list, the learning rate as a
# plain attribute (a schedule simply assigns `optimizer.lr = ...`), one state dictionary per
# parameter, checkpoint support and the argument checks. It is written for you.
#
# `state_dict()` is flat: hyperparameters as numbers and each state array under
# `state.<index>.<name>`, where the index is the parameter's position in the list. Plain names,
# numbers and arrays are all a `.npz` checkpoint needs (module 07), so nothing is pickled.
#
# PyTorch code finds its own spellings too: `optimizer.state[p]` is parameter `p`'s state
# dictionary (the list is also a mapping from each parameter), and `optimizer.param_groups` is one
# group holding every parameter, whose `group["lr"] = ...` sets `optimizer.lr`.


# %% nbgrader={"grade": false, "grade_id": "base", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def _check_number(name: str, value, low: float, high: float | None = None, open_high=False):
    """Raise one clear ValueError unless low <= value <= high (or < high)."""
    ok = isinstance(value, (int, float, np.number)) and math.isfinite(value) and value >= low
    if ok and high is not None:
        ok = value < high if open_high else value <= high
    if not ok:
        bound = "" if high is None else f" and {'<' if open_high else '<='} {high}"
        raise ValueError(f"{name} must be a number >= {low}{bound}, got {value!r}")


class ParamState(list):
    """One state dictionary per parameter, in the parameters' order (a step zips the two), and
    looked up by the parameter itself as in PyTorch: `optimizer.state[p]["m"]`."""

    def __init__(self, params: list[Tensor], states: list[dict]):
        super().__init__(states)
        self._params, self._index = params, {id(p): i for i, p in enumerate(params)}

    def __getitem__(self, key):
        if isinstance(key, Tensor):
            if id(key) not in self._index:
                raise KeyError("this tensor is not one of the optimizer's parameters")
            key = self._index[id(key)]
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        return id(key) in self._index if isinstance(key, Tensor) else super().__contains__(key)

    def keys(self) -> list[Tensor]:
        return list(self._params)

    def values(self) -> list[dict]:
        return list(self)

    def items(self) -> list[tuple[Tensor, dict]]:
        return list(zip(self._params, self))


class ParamGroup(dict):
    """PyTorch's `optimizer.param_groups[0]`: the parameters and the hyperparameters, live."""

    def __init__(self, optimizer):
        self._optimizer = optimizer
        super().__init__(params=optimizer.params)
        for name in optimizer.hyperparameters:
            super().__setitem__(name, getattr(optimizer, name))

    def __getitem__(self, key):
        if key in self._optimizer.hyperparameters:
            return getattr(self._optimizer, key)
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        if key not in self._optimizer.hyperparameters:
            raise KeyError(
                f"{type(self._optimizer).__name__} has no hyperparameter {key!r}; its parameter "
                f"group holds {', '.join(self._optimizer.hyperparameters)}"
            )
        setattr(self._optimizer, key, value)
        super().__setitem__(key, value)


class Optimizer:
    """Shared machinery: parameters, `lr`, per-parameter state, zero_grad and checkpoints."""

    hyperparameters: tuple[str, ...] = ("lr",)

    def __init__(self, params, lr: float):
        params = list(params.values() if isinstance(params, dict) else params)
        if not params:
            raise ValueError("optimizer got an empty parameter list; pass model.parameters()")
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"parameter {i} is a {type(p).__name__}, not a Tensor; pass model.parameters()"
                )
        unique = {id(p): p for p in params}
        self.params: list[Tensor] = list(unique.values())
        _check_number("lr", lr, 0.0)
        self.lr = lr
        self.state = [{} for _ in self.params]

    @property
    def state(self) -> ParamState:
        """The state dictionary of every parameter, by position or by the parameter itself."""
        return self._state

    @state.setter
    def state(self, states) -> None:
        self._state = ParamState(self.params, list(states))

    @property
    def param_groups(self) -> list[ParamGroup]:
        """One group holding every parameter; setting `group["lr"]` sets this optimizer's lr."""
        return [ParamGroup(self)]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients: drop them (default) or fill them with zeros in place."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.fill(0)

    def step(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def state_dict(self) -> dict:
        """Hyperparameters as numbers and state as `state.<i>.<name>` array copies."""
        out: dict = {name: getattr(self, name) for name in self.hyperparameters}
        for i, state in enumerate(self.state):
            for key, value in state.items():
                out[f"state.{i}.{key}"] = np.array(value, copy=True)
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore `state_dict()` output; checks everything before changing anything."""
        hyper, states = {}, [{} for _ in self.params]
        for key, value in state_dict.items():
            if key in self.hyperparameters:
                hyper[key] = float(np.asarray(value))
                continue
            parts = key.split(".")
            if len(parts) != 3 or parts[0] != "state" or not parts[1].isdigit():
                raise ValueError(
                    f"unexpected optimizer state key {key!r} for {type(self).__name__}; "
                    "load a state_dict saved by the same optimizer class"
                )
            i, name = int(parts[1]), parts[2]
            if i >= len(self.params):
                raise ValueError(
                    f"optimizer state has an entry for parameter {i} but the optimizer holds "
                    f"{len(self.params)}; build it over the same model"
                )
            value = np.asarray(value)
            if name == "step":
                states[i][name] = int(value)
            elif value.shape != self.params[i].shape:
                raise ValueError(
                    f"optimizer state {key} has shape {value.shape} but parameter {i} has "
                    f"{self.params[i].shape}; build the optimizer over the same model"
                )
            else:
                states[i][name] = np.array(value, dtype=self.params[i].data.dtype, copy=True)
        for name, value in hyper.items():
            setattr(self, name, value)
        self.state = states

    def __repr__(self):
        args = ", ".join(f"{n}={getattr(self, n)}" for n in self.hyperparameters)
        return f"{type(self).__name__}({len(self.params)} parameters, {args})"


# %% [markdown]
# ## SGD with momentum and weight decay
#
# For each parameter `p` whose `.grad` is not None (a parameter the loss did not reach has no
# gradient and is left alone):
#
# 1. `g = p.grad`, plus `weight_decay * p.data` when weight decay is on (a new array: never
#    change `p.grad` itself).
# 2. With momentum: on the first step the buffer `state["momentum_buffer"]` is a copy of `g`;
#    afterwards `buf = momentum * buf + g`. Then `g = buf`.
# 3. `p.data -= lr * g`.


# %% nbgrader={"grade": false, "grade_id": "sgd", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and L2 weight decay."""

    hyperparameters = ("lr", "momentum", "weight_decay")

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr)
        _check_number("momentum", momentum, 0.0)
        _check_number("weight_decay", weight_decay, 0.0)
        self.momentum, self.weight_decay = momentum, weight_decay

    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        for p, state in zip(self.params, self.state):
            if p.grad is None:
                continue
            ### BEGIN SOLUTION
            g = p.grad
            if self.weight_decay:
                g = g + self.weight_decay * p.data  # L2 decay, into the gradient
            if self.momentum:
                buf = state.get("momentum_buffer")
                buf = g.copy() if buf is None else self.momentum * buf + g
                state["momentum_buffer"] = g = buf
            p.data -= self.lr * g
            ### END SOLUTION


# %% [markdown]
# ## Adam
#
# Per parameter with a gradient, with `t` counted per parameter in `state["step"]`:
#
# ```
# g = p.grad (+ weight_decay * p.data)          # L2 decay, as in torch.optim.Adam
# m = beta1 * m + (1 - beta1) * g               # state["exp_avg"], starts at zeros
# v = beta2 * v + (1 - beta2) * g * g           # state["exp_avg_sq"], starts at zeros
# p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
# ```
#
# `_adam_update(p, state, g)` does the three lines after the first one; `step()` forms `g`.
# The last line is the bias-corrected step of the usual textbook form,
# `lr * m_hat / (sqrt(v_hat) + eps)` with `m_hat = m / (1 - beta1**t)` and
# `v_hat = v / (1 - beta2**t)`: write whichever you read more easily.


# %% nbgrader={"grade": false, "grade_id": "adam", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Adam(Optimizer):
    """Adam: per-parameter steps from running means of the gradient and its square."""

    hyperparameters = ("lr", "beta1", "beta2", "eps", "weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        _check_number("beta1", betas[0], 0.0, 1.0, open_high=True)
        _check_number("beta2", betas[1], 0.0, 1.0, open_high=True)
        _check_number("eps", eps, 0.0)
        _check_number("weight_decay", weight_decay, 0.0)
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps, self.weight_decay = eps, weight_decay

    @property
    def betas(self) -> tuple[float, float]:
        return self.beta1, self.beta2

    def _adam_update(self, p: Tensor, state: dict, g: np.ndarray) -> None:
        """Update the moments with `g` and move `p` by the bias-corrected Adam step."""
        ### BEGIN SOLUTION
        if "exp_avg" not in state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p.data)
            state["exp_avg_sq"] = np.zeros_like(p.data)
        state["step"] += 1
        t = state["step"]
        m = state["exp_avg"] = self.beta1 * state["exp_avg"] + (1 - self.beta1) * g
        v = state["exp_avg_sq"] = self.beta2 * state["exp_avg_sq"] + (1 - self.beta2) * g * g
        m_hat = m / (1 - self.beta1**t)  # undo the bias of starting at zero
        v_hat = v / (1 - self.beta2**t)
        p.data -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        ### END SOLUTION

    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        for p, state in zip(self.params, self.state):
            if p.grad is None:
                continue
            ### BEGIN SOLUTION
            g = p.grad
            if self.weight_decay:
                g = g + self.weight_decay * p.data  # L2 decay, as in torch.optim.Adam
            self._adam_update(p, state, g)
            ### END SOLUTION


# %% [markdown]
# ## AdamW
#
# Only the weight decay differs: before the Adam step, shrink the parameter itself,
# `p.data *= 1 - lr * weight_decay`, and pass the plain gradient to `_adam_update`.


# %% nbgrader={"grade": false, "grade_id": "adamw", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class AdamW(Adam):
    """Adam with decoupled weight decay: weights shrink directly, not through the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)

    def step(self) -> None:
        """Decay each weight, then take the Adam step with the raw gradient."""
        for p, state in zip(self.params, self.state):
            if p.grad is None:
                continue
            ### BEGIN SOLUTION
            if self.weight_decay:
                p.data *= 1.0 - self.lr * self.weight_decay
            self._adam_update(p, state, p.grad)
            ### END SOLUTION


# %% [markdown]
# ## Try it: minimise a bowl
#
# `f(w) = sum((w - 3)^2)` has its minimum at 3. Adam walks there from zero.

# %%
w = Tensor(np.zeros(3), requires_grad=True)
opt = Adam([w], lr=0.1)
for _ in range(200):
    opt.zero_grad()
    ((w - 3.0) ** 2).sum().backward()
    opt.step()
print(w.data)

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


def trajectory(make, rng, steps: int = 4, shape=(3, 4)) -> np.ndarray:
    """The parameters after each of `steps` optimizer steps on random gradients."""
    p = Tensor(rng.normal(size=shape).astype(np.float32), requires_grad=True)
    opt = make([p])
    seen = []
    for _ in range(steps):
        p.grad = rng.normal(size=shape).astype(np.float32)
        opt.step()
        seen.append(p.data.copy())
    return np.stack(seen)


# %% nbgrader={"grade": true, "grade_id": "test-sgd", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="sgd")
def test_sgd_momentum_by_hand(rng):
    p = Tensor(np.array([1.0, -2.0]), requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9)
    p.grad = np.array([1.0, 1.0], dtype=np.float32)
    opt.step()  # buf = g = 1: p = p - 0.1
    np.testing.assert_allclose(p.data, [0.9, -2.1], rtol=1e-5, atol=1e-6)
    opt.step()  # buf = 0.9 * 1 + 1 = 1.9: p = p - 0.19
    np.testing.assert_allclose(p.data, [0.71, -2.29], rtol=1e-5, atol=1e-6)
    assert p.data.dtype == np.float32
    return {
        "plain": trajectory(lambda ps: SGD(ps, lr=0.1), rng),
        "momentum": trajectory(lambda ps: SGD(ps, lr=0.05, momentum=0.9), rng),
        "decay": trajectory(lambda ps: SGD(ps, lr=0.05, momentum=0.5, weight_decay=0.1), rng),
    }


# %% nbgrader={"grade": true, "grade_id": "test-adam", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="adam")
def test_adam_first_step_is_lr_sized(rng):
    # After bias correction, the first Adam step is lr * sign(g) (up to eps) whatever |g| is.
    p = Tensor(np.array([0.0, 0.0, 0.0]), requires_grad=True)
    opt = Adam([p], lr=0.01)
    p.grad = np.array([1e-3, -5.0, 200.0], dtype=np.float32)
    opt.step()
    np.testing.assert_allclose(p.data, [-0.01, 0.01, -0.01], rtol=1e-4)
    return {
        "adam": trajectory(lambda ps: Adam(ps, lr=0.01), rng),
        "betas": trajectory(lambda ps: Adam(ps, lr=0.02, betas=(0.8, 0.95)), rng),
        "l2": trajectory(lambda ps: Adam(ps, lr=0.01, weight_decay=0.1), rng),
    }


# %% nbgrader={"grade": true, "grade_id": "test-adamw", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="adamw")
def test_adamw_decays_weights_directly(rng):
    p = Tensor(np.array([2.0]), requires_grad=True)
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = np.array([0.0], dtype=np.float32)  # no gradient signal: only the decay acts
    opt.step()
    np.testing.assert_allclose(p.data, [2.0 * (1 - 0.1 * 0.5)], rtol=1e-5, atol=1e-6)
    q = Tensor(np.array([1.0]), requires_grad=True)
    opt = AdamW([p, q], lr=0.1)
    q.grad, p.grad = np.array([1.0], dtype=np.float32), None
    before = p.data.copy()
    opt.step()  # p has no gradient: skipped entirely, no decay
    np.testing.assert_array_equal(p.data, before)
    opt.zero_grad()
    assert q.grad is None
    return {
        "adamw": trajectory(lambda ps: AdamW(ps, lr=0.01, weight_decay=0.1), rng),
        "strong": trajectory(
            lambda ps: AdamW(ps, lr=0.05, betas=(0.5, 0.9), weight_decay=1.0), rng
        ),
    }
