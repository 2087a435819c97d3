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
# # Module 07 — Training
#
# You have a model, a loss, gradients and an optimizer. A training loop is those four in a fixed
# order, repeated: forget old gradients, run the model, compute the loss, backpropagate, step.
# Real training adds a few safety and bookkeeping tools, and this module builds them:
#
# - **Gradient clipping by global norm.** One unlucky batch can produce a huge gradient and
#   throw the weights far away. Treat all gradients as one long vector; if its length exceeds
#   `max_norm`, scale every gradient by the same factor so the length is `max_norm`. The direction
#   is kept, only the step size is capped.
# - **A learning-rate schedule.** Early on, Adam's second-moment estimates are noisy, so the first
#   steps use a small rate that grows linearly (warmup). Afterwards the rate follows half a cosine
#   down to `min_lr`: large steps while the loss falls fast, small ones to settle at the end.
# - **Checkpoints.** Training a GPT takes long enough that you want to stop and resume. A
#   checkpoint holds the weights, the optimizer state (Adam's moments: without them a resumed run
#   takes different steps) and the step count. It is a numpy `.npz` archive of plain arrays,
#   loaded with `allow_pickle=False`: unpickling runs arbitrary code, so a checkpoint someone
#   sends you must never be able to contain pickled objects. It is written to a temporary file
#   and renamed into place, so a crash mid-write never destroys the previous checkpoint.
# - **Seeding.** `seed_everything(seed)` makes initialisation and shuffling repeatable.

# %%
#| default_exp core.training

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.checkpoint import check_fits, json_default, read_arrays, write_arrays
from tinytorch.core.optimizers import Optimizer

# %% [markdown]
# ## Gradient clipping by global norm
#
# `total = sqrt(sum over parameters of sum(g**2))`, counting only parameters whose `.grad` is
# set. If `total > max_norm`, multiply every gradient in place by `max_norm / (total + 1e-6)`
# (the 1e-6 guards against dividing by zero, as PyTorch does). Return `total`, measured before
# clipping: it is worth logging, since a growing norm is an early sign of divergence.
#
# HINT: `np.vdot(g, g)` is the sum of squares without building `g**2`.


# %% nbgrader={"grade": false, "grade_id": "clip", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def clip_grad_norm(params, max_norm: float) -> float:
    """Scale all gradients together so their global L2 norm is at most `max_norm`."""
    if not (isinstance(max_norm, (int, float)) and math.isfinite(max_norm) and max_norm > 0):
        raise ValueError(
            f"clip_grad_norm: max_norm must be a positive number, got {max_norm!r}; "
            "use e.g. max_norm=1.0"
        )
    grads = [p.grad for p in params if p.grad is not None]
    ### BEGIN SOLUTION
    total = math.sqrt(sum(float(np.vdot(g, g)) for g in grads))
    scale = max_norm / (total + 1e-6)
    if scale < 1.0:
        for g in grads:
            g *= scale
    ### END SOLUTION
    return total


# %% [markdown]
# ## Warmup and cosine decay
#
# With `W = warmup_steps` and `T = total_steps`, the rate at step `s` (counted from 0) is
#
# - `max_lr * (s + 1) / W` while `s < W`: the first step already moves, and step `W - 1` reaches
#   `max_lr`;
# - `min_lr + (max_lr - min_lr) * (1 + cos(pi * (s - W) / (T - W))) / 2` for `W <= s < T`;
# - `min_lr` from step `T` on.
#
# `step` is the number of optimizer steps already taken: assign `optimizer.lr = schedule(step)`
# before each `optimizer.step()`, so the first step uses `schedule(0)`. That is `max_lr / W` with
# a warmup, not `max_lr`; with `W = 0` it is `max_lr`.


# %% nbgrader={"grade": false, "grade_id": "schedule", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class CosineSchedule:
    """Learning rate: linear warmup to `max_lr`, then half a cosine down to `min_lr`."""

    def __init__(self, max_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0):
        if not (math.isfinite(max_lr) and 0 <= min_lr <= max_lr):
            raise ValueError(
                f"CosineSchedule needs 0 <= min_lr <= max_lr, got min_lr={min_lr}, max_lr={max_lr}"
            )
        if not (isinstance(warmup_steps, int) and isinstance(total_steps, int)):
            raise TypeError("CosineSchedule: warmup_steps and total_steps must be integers")
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(
                f"CosineSchedule needs 0 <= warmup_steps < total_steps, got "
                f"warmup_steps={warmup_steps}, total_steps={total_steps}"
            )
        self.max_lr, self.min_lr = max_lr, min_lr
        self.warmup_steps, self.total_steps = warmup_steps, total_steps

    def __call__(self, step: int) -> float:
        """The learning rate for step `step` (0-based)."""
        if step < 0:
            raise ValueError(f"CosineSchedule: step must be >= 0, got {step}")
        ### BEGIN SOLUTION
        if step < self.warmup_steps:
            return self.max_lr * (step + 1) / self.warmup_steps
        if step >= self.total_steps:
            return self.min_lr
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.min_lr + (self.max_lr - self.min_lr) * 0.5 * (
            1.0 + math.cos(math.pi * progress)
        )
        ### END SOLUTION

    def __repr__(self):
        return (
            f"CosineSchedule(max_lr={self.max_lr}, warmup_steps={self.warmup_steps}, "
            f"total_steps={self.total_steps}, min_lr={self.min_lr})"
        )


# %% [markdown]
# ## One training step
#
# `train_step` is the loop body: zero the gradients, forward, loss, backward, optionally clip,
# step; return the loss as a float. Check the loss before stepping: a `nan` or `inf` loss would
# write `nan` into every weight, and the run could not recover. Raise a `FloatingPointError`
# instead, so the weights stay as they were, with a message that begins
# `f"the loss is {value}; the weights were not updated"` (the tests look for those words) and
# goes on with the fix, e.g. ". Lower the learning rate or clip gradients (max_norm=1.0)".
#
# `Trainer` bundles a model, loss, optimizer and optional schedule and clipping, and counts steps.
# `Trainer.step(x, y)` does, in this order: set `self.optimizer.lr = self.schedule(self.step_count)`
# (when there is a schedule), put the model in training mode, run `train_step`, then add one to
# `self.step_count` and append the loss to `self.history`. So `step_count` counts finished steps,
# the first batch trains at `schedule(0)`, and a run resumed from a checkpoint continues at
# `schedule(step_count)`, the rate the next step would have had.
#
# Both take an optional `backward`, for a step whose forward and backward run elsewhere (module
# 18's `DataParallel.backward` splits the batch over threads): `backward(loss_fn, x, y)` leaves
# the gradients in `.grad` and returns the loss as a float, in place of your forward, loss and
# `loss.backward()`. Everything around it (zeroing, the nan check, clipping, the step) stays.


# %% nbgrader={"grade": false, "grade_id": "train-step", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def train_step(model, loss_fn, optimizer: Optimizer, x, y, max_norm: float | None = None,
               backward=None) -> float:  # fmt: skip
    """One optimisation step on the batch `(x, y)`; returns the loss before the step."""
    ### BEGIN SOLUTION
    optimizer.zero_grad()
    if backward is None:
        loss = loss_fn(model(x), y)
        loss.backward()
        value = loss.item()
    else:
        value = backward(loss_fn, x, y)
    if not math.isfinite(value):
        raise FloatingPointError(
            f"the loss is {value}; the weights were not updated. Lower the learning rate "
            "or clip gradients (max_norm=1.0)"
        )
    if max_norm is not None:
        clip_grad_norm(optimizer.params, max_norm)
    optimizer.step()
    ### END SOLUTION
    return value


class Trainer:
    """A model, a loss and an optimizer, with optional schedule and clipping, counting steps."""

    def __init__(self, model, loss_fn, optimizer: Optimizer, schedule=None, max_norm=None,
                 backward=None):  # fmt: skip
        if isinstance(loss_fn, Optimizer) or not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"Trainer(model, loss_fn, optimizer) got a {type(loss_fn).__name__} as loss_fn "
                f"and a {type(optimizer).__name__} as optimizer; pass the loss before the "
                "optimizer: Trainer(model, loss_fn, optimizer)"
            )
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.schedule, self.max_norm, self.backward = schedule, max_norm, backward
        self.step_count = 0
        self.history: list[float] = []

    def step(self, x, y) -> float:
        """Set the scheduled learning rate, train on one batch, record the loss."""
        ### BEGIN SOLUTION
        if self.schedule is not None:
            self.optimizer.lr = self.schedule(self.step_count)
        self.model.train()
        loss = train_step(self.model, self.loss_fn, self.optimizer, x, y, self.max_norm,
                          self.backward)  # fmt: skip
        self.step_count += 1
        self.history.append(loss)
        ### END SOLUTION
        return loss

    def evaluate(self, x, y) -> float:
        """The loss on `(x, y)` in eval mode, without building a graph."""
        self.model.eval()
        with no_grad():
            loss = self.loss_fn(self.model(x), y).item()
        self.model.train()
        return loss

    def save(self, path, extra=None) -> None:
        save_checkpoint(path, self.model, self.optimizer, step=self.step_count, extra=extra)

    def load(self, path) -> dict:
        info = load_checkpoint(path, self.model, self.optimizer)
        self.step_count = info["step"]
        return info


# %% [markdown]
# ## Checkpoints
#
# A checkpoint is one flat dictionary of arrays. The keys say what each array is:
#
# | key | holds |
# |---|---|
# | `model.<name>` | each entry of `model.state_dict()` |
# | `optimizer.<key>` | each entry of `optimizer.state_dict()` (numbers become 0-d arrays) |
# | `optimizer_class` | the optimizer's class name, so Adam state is never loaded into SGD |
# | `step` | the step count |
# | `extra.<key>` | each numpy array in `extra` |
# | `extra_json` | every other entry of `extra`, as one JSON string in a string array |
#
# Numbers and strings in `extra` go through `json.dumps(plain, default=json_default)`, which
# turns numpy scalars into Python numbers. A step count comes back as `int(arrays["step"])`; a
# checkpoint without `optimizer_class` gives `None` for the class; the `extra_json` string is
# element `[0]` of its array, and its entries are added to the arrays of `extra`.
#
# Writing the archive safely and reading it without pickle is the given file
# `tinytorch/core/checkpoint.py` (`write_atomic`, `write_arrays`, `read_arrays`, and `check_fits`,
# which names a weight that does not fit the model); you write `checkpoint_arrays` (dictionary
# out) and `split_checkpoint` (dictionary back in). `save_checkpoint`, `read_checkpoint` and
# `load_checkpoint` below join the two; every reader of a checkpoint in the project goes through
# `read_checkpoint`.


# %% nbgrader={"grade": false, "grade_id": "checkpoint", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def checkpoint_arrays(model, optimizer=None, step: int = 0, extra=None) -> dict:
    """The flat {key: array} dictionary a checkpoint stores (see the table above)."""
    extra = dict(extra or {})
    arrays: dict = {}
    ### BEGIN SOLUTION
    for name, value in model.state_dict().items():
        arrays[f"model.{name}"] = value
    if optimizer is not None:
        arrays["optimizer_class"] = np.array(type(optimizer).__name__)
        for key, value in optimizer.state_dict().items():
            arrays[f"optimizer.{key}"] = np.asarray(value)
    arrays["step"] = np.array(int(step), dtype=np.int64)
    plain = {}
    for key, value in extra.items():
        if isinstance(value, np.ndarray) and value.dtype != object:
            arrays[f"extra.{key}"] = value
        else:
            plain[key] = value
    arrays["extra_json"] = np.array([json.dumps(plain, default=json_default)])
    ### END SOLUTION
    return arrays


def split_checkpoint(arrays: dict) -> tuple[dict, dict, int, dict, str | None]:
    """Undo `checkpoint_arrays`: (model weights, optimizer state, step, extra, optimizer class)."""
    weights, opt_state, extra = {}, {}, {}
    ### BEGIN SOLUTION
    for key, value in arrays.items():
        group, _, name = key.partition(".")
        if group == "model":
            weights[name] = value
        elif group == "optimizer":
            opt_state[name] = value
        elif group == "extra":
            extra[name] = value
    if "extra_json" in arrays:
        extra.update(json.loads(str(arrays["extra_json"][0])))
    step = int(arrays.get("step", 0))
    opt_class = str(arrays["optimizer_class"]) if "optimizer_class" in arrays else None
    ### END SOLUTION
    return weights, opt_state, step, extra, opt_class


def save_checkpoint(path, model, optimizer=None, step: int = 0, extra=None) -> None:
    """Write model weights, optimizer state, step and `extra` to the .npz file `path`."""
    write_arrays(Path(path), checkpoint_arrays(model, optimizer, step, extra))


def read_checkpoint(path) -> tuple[dict, dict, int, dict, str | None]:
    """A checkpoint file as `split_checkpoint` gives it back, without loading it into a model."""
    return split_checkpoint(read_arrays(path))


def load_checkpoint(path, model, optimizer=None) -> dict:
    """Restore a checkpoint into `model` (and `optimizer`); returns {"step", "extra"}."""
    path = Path(path)
    weights, opt_state, step, extra, opt_class = read_checkpoint(path)
    check_fits(model, weights, path)
    if optimizer is not None:
        if opt_class is None:
            raise ValueError(f"checkpoint {path} holds no optimizer state; pass optimizer=None")
        if opt_class != type(optimizer).__name__:
            raise ValueError(
                f"checkpoint {path} holds {opt_class} state but the optimizer is "
                f"{type(optimizer).__name__}; build the same optimizer class"
            )
        optimizer.load_state_dict(opt_state)
    model.load_state_dict(weights)
    return {"step": step, "extra": extra}


# %% [markdown]
# ## Reproducibility


# %% nbgrader={"grade": false, "grade_id": "seed", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def seed_everything(seed: int) -> None:
    """Seed Python's `random` and numpy's global generator (used by layer initialisation)."""
    if not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    ### BEGIN SOLUTION
    random.seed(int(seed))
    np.random.seed(int(seed))
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "loss-aliases", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
# Module 04's losses, also where another course's learners import them from
# (`from tinytorch.core.training import MSELoss`): the same classes, not copies.
from tinytorch.core import losses as _losses  # noqa: E402 - an export cell of its own

MSELoss = _losses.MSELoss
CrossEntropyLoss = _losses.CrossEntropyLoss

# %% [markdown]
# ## Try it: the schedule of a short run

# %%
schedule = CosineSchedule(max_lr=1e-3, warmup_steps=3, total_steps=10, min_lr=1e-4)
print([round(schedule(s), 6) for s in range(11)])

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor


# %% nbgrader={"grade": true, "grade_id": "test-clip", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="clip")
def test_clip_grad_norm_by_hand(rng):
    a, b = Tensor(np.zeros(2), requires_grad=True), Tensor(np.zeros(1), requires_grad=True)
    a.grad, b.grad = np.array([3.0, 0.0], dtype=np.float32), np.array([4.0], dtype=np.float32)
    assert abs(clip_grad_norm([a, b], 10.0) - 5.0) < 1e-6  # below the limit: unchanged
    np.testing.assert_allclose(a.grad, [3.0, 0.0], rtol=1e-5, atol=1e-7)
    assert abs(clip_grad_norm([a, b], 1.0) - 5.0) < 1e-6
    np.testing.assert_allclose(
        np.concatenate([a.grad, b.grad]), [0.6, 0.0, 0.8], rtol=1e-5, atol=1e-7
    )
    params = [Tensor(np.zeros(s), requires_grad=True) for s in [(3, 4), (4,), (2, 2)]]
    for p in params:
        p.grad = rng.normal(size=p.shape).astype(np.float32)
    params.append(Tensor(np.zeros(3), requires_grad=True))  # no gradient: skipped
    grads = [p.grad.copy() for p in params[:3]]
    total = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    limit = float(rng.uniform(0.2, 0.8)) * total
    norm = clip_grad_norm(params, limit)
    assert abs(norm - total) < 1e-4 * total and params[3].grad is None
    kept = clip_grad_norm(params, 10 * total)  # under the limit now: unchanged
    return {"norm": np.array(norm), "kept": np.array(kept),
            "clipped": np.concatenate([p.grad.ravel() for p in params[:3]])}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-schedule", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="schedule")
def test_schedule_shape(rng):
    s = CosineSchedule(max_lr=1.0, warmup_steps=4, total_steps=14, min_lr=0.2)
    steps, want = [0, 3, 4, 9, 14, 100], [0.25, 1.0, 1.0, 0.6, 0.2, 0.2]  # 9: the midpoint
    np.testing.assert_allclose([s(n) for n in steps], want, rtol=1e-9, atol=1e-12)
    warmup = int(rng.integers(0, 6))
    total = warmup + int(rng.integers(3, 20))
    peak = float(rng.uniform(0.1, 2.0))
    s = CosineSchedule(max_lr=peak, warmup_steps=warmup, total_steps=total,
                       min_lr=float(rng.uniform(0, 0.5)) * peak)  # fmt: skip
    return {"lr": np.array([s(step) for step in range(total + 5)])}


# %% nbgrader={"grade": true, "grade_id": "test-checkpoint", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="checkpoint")
def test_checkpoint_arrays_round_trip(rng):
    model = Linear(3, 2)
    model.weight.data = rng.normal(size=(3, 2)).astype(np.float32)
    model.bias.data = rng.normal(size=2).astype(np.float32)
    curve = rng.normal(size=int(rng.integers(2, 6)))
    step = int(rng.integers(0, 10**6))
    arrays = checkpoint_arrays(model, step=step, extra={"name": "run", "curve": curve})
    assert all(a.dtype != object for a in arrays.values())
    weights, _, got_step, extra, _ = split_checkpoint(arrays)
    assert got_step == step and extra["name"] == "run"
    np.testing.assert_array_equal(extra["curve"], curve)
    np.testing.assert_array_equal(weights["weight"], model.weight.data)
    return {"weight": weights["weight"], "bias": weights["bias"], "step": np.array(got_step),
            "curve": extra["curve"]}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-train-step", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades=("train-step", "seed"))
def test_train_step_and_seed(rng):
    from tinytorch.core.losses import mse_loss
    from tinytorch.core.optimizers import SGD

    seed = int(rng.integers(1 << 31))
    draws = []
    for _ in range(2):  # the same seed, the same draws from both generators
        seed_everything(seed)
        draws.append([random.random(), float(np.random.random_sample())])
    assert draws[0] == draws[1]
    model = Linear(3, 2)
    model.weight.data = rng.normal(size=(3, 2)).astype(np.float32)
    model.bias.data = rng.normal(size=2).astype(np.float32)
    x = Tensor(rng.normal(size=(8, 3)).astype(np.float32))
    y = Tensor(rng.normal(size=(8, 2)).astype(np.float32))
    first = train_step(model, mse_loss, SGD(model.parameters(), lr=0.1), x, y)
    steps = [lambda s: 0.05 * (s + 1), None]
    losses = [first]
    for schedule in steps:
        trainer = Trainer(model, mse_loss, SGD(model.parameters(), lr=0.2), schedule, max_norm=0.5)
        losses += [trainer.step(x, y) for _ in range(3)]
        assert trainer.step_count == 3 and trainer.history == losses[-3:]
    return {"seeded": np.array(draws[0]), "losses": np.array(losses),
            "weight": model.weight.data, "bias": model.bias.data}  # fmt: skip
