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
# # Module 04 — Losses
#
# A loss turns "how wrong is the model" into one number whose gradient says how to change every
# parameter. Two cover most of this course:
#
# - **Mean squared error** for regression: `mean((prediction - target)²)`.
# - **Cross-entropy** for classification and language modelling: the model outputs one score
#   (logit) per class; softmax turns scores into probabilities; the loss is the mean of
#   `-log p(correct class)`. A GPT predicting the next character is a classifier over the
#   vocabulary at every position, so its logits are `(batch, seq, vocab)` and its targets
#   `(batch, seq)`.
#
# **Why fuse log-softmax into the loss?** Computing `softmax` and then `log` fails twice over:
# a probability that rounds to 0 in float32 gives `log(0) = -inf`, and the backward of the chain
# divides by that tiny probability. Written directly, with m the row maximum,
#
# log p_c = (z_c − m) − log Σ_j exp(z_j − m)
#
# every exponent is ≤ 0, so nothing overflows even for logits of 1e4, and the gradient with
# respect to the logits simplifies to `(softmax(z) − onehot(target)) / N`: no division at all.
#
# **Padding.** Batches of unequal sequences are padded; those positions carry a target equal to
# `ignore_index` and must neither count in the mean nor receive a gradient. If every position is
# ignored the loss is 0 with zero gradient, rather than 0/0 = NaN.

# %%
#| default_exp core.losses

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import numpy as np

from tinytorch.core.tensor import Function, ShapeError, Tensor


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def _dim_or_axis(name: str, dim, axis) -> int:
    """The axis a function was given as PyTorch's `dim=` or numpy's `axis=` (default: the last)."""
    if dim is not None and axis is not None and dim != axis:
        raise ValueError(f"{name}: dim={dim} and axis={axis} disagree; give one of them")
    return -1 if dim is None and axis is None else dim if dim is not None else axis


# %% [markdown]
# ## Mean squared error
#
# With d = prediction − target and n values, the loss is Σd²/n, so the gradient is 2d/n for the
# prediction and −2d/n for the target.


# %% nbgrader={"grade": false, "grade_id": "mse", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class MSEFunction(Function):
    """mean((prediction - target)²) over every value."""

    def forward(self, prediction, target):
        if prediction.shape != target.shape:
            raise ShapeError(
                f"mse_loss: prediction shape {prediction.shape} differs from target shape "
                f"{target.shape}; reshape one so they match exactly"
            )
        ### BEGIN SOLUTION
        self.diff = prediction - target
        self.count = max(self.diff.size, 1)
        return np.asarray(np.sum(self.diff**2) / self.count, dtype=prediction.dtype)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        g = self.diff * (2 * grad / self.count)
        return g, (-g if self.needs_grad[1] else None)
        ### END SOLUTION


# %% [markdown]
# ## Cross-entropy
#
# The checks come first (outside the part you write), so a wrong target reads as one line instead
# of an index error deep inside numpy. Targets may arrive as an integer array or as a `Tensor`,
# whose values are floats; whole numbers are accepted either way.
#
# In `forward`, flatten logits to `(N, C)` and targets to `(N,)`, mark which rows count, compute
# the shifted logits, and take each row's log-probability of its target: the target's shifted
# logit minus the log of the row's sum of exponentials. Keep the softmax probabilities for the
# backward, which is `softmax - one_hot(target)`: a copy of the probabilities with 1 subtracted at
# each target, the ignored rows zeroed and everything scaled by `grad / count`.


# %% nbgrader={"grade": false, "grade_id": "cross-entropy-checks", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def _class_indices(logits_shape: tuple, targets, ignore_index) -> np.ndarray:
    """Targets as an int64 array of shape logits_shape[:-1]; one clear error for bad input."""
    targets = np.asarray(targets.data if isinstance(targets, Tensor) else targets)
    if len(logits_shape) == 0:
        raise ShapeError("cross_entropy: logits must have a class axis, got a scalar")
    if targets.shape != logits_shape[:-1]:
        raise ShapeError(
            f"cross_entropy: logits {logits_shape} need targets of shape {logits_shape[:-1]} "
            f"(one class index per row), got targets of shape {targets.shape}"
        )
    if targets.dtype.kind == "f":
        whole = np.isfinite(targets) & (targets == np.round(targets))
        if not whole.all():
            bad = targets[~whole].flat[0]
            raise TypeError(
                f"cross_entropy: targets must be whole class indices, found {bad}; "
                "pass integer labels (e.g. targets.astype(np.int64))"
            )
    elif targets.dtype.kind not in "iu":
        raise TypeError(
            f"cross_entropy: targets must be integer class indices, got dtype {targets.dtype}"
        )
    targets = targets.astype(np.int64)
    classes = logits_shape[-1]
    counted = targets if ignore_index is None else targets[targets != ignore_index]
    if counted.size and (counted.min() < 0 or counted.max() >= classes):
        bad = counted.min() if counted.min() < 0 else counted.max()
        hint = "" if ignore_index is None else f" (or ignore_index={ignore_index})"
        raise ValueError(
            f"cross_entropy: target {bad} is out of range for {classes} classes; "
            f"targets must lie in [0, {classes - 1}]{hint}"
        )
    return targets


# %% nbgrader={"grade": false, "grade_id": "cross-entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class CrossEntropyFunction(Function):
    """Mean of -log softmax(logits)[target] over non-ignored rows, as one fused node."""

    def forward(self, logits, targets, ignore_index=None):
        targets = _class_indices(logits.shape, targets, ignore_index)
        ### BEGIN SOLUTION
        z = logits.reshape(-1, logits.shape[-1])  # (N, C)
        t = targets.reshape(-1)  # (N,)
        keep = np.ones(t.shape, bool) if ignore_index is None else t != ignore_index
        t = np.where(keep, t, 0)  # any valid index for ignored rows; they are masked out
        rows = np.arange(t.size)
        self.count = int(keep.sum())

        shifted = z - z.max(axis=1, keepdims=True)  # (N, C), every entry <= 0
        exps = np.exp(shifted)
        total = exps.sum(axis=1)  # (N,)
        log_probs = shifted[rows, t] - np.log(total)  # (N,) log p(target)
        loss = -np.sum(log_probs[keep]) / max(self.count, 1)

        if self.needs_grad[0]:
            self.probs = exps / total[:, None]  # softmax (N, C), for the backward
            self.t, self.keep, self.shape = t, keep, logits.shape
        return np.asarray(loss, dtype=logits.dtype)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        g = self.probs.copy()  # (N, C): softmax minus the one-hot target
        g[np.arange(self.t.size), self.t] -= 1
        scale = self.keep * grad / max(self.count, 1)  # (N,), 0 for ignored rows
        return ((g * scale[:, None].astype(g.dtype)).reshape(self.shape),)
        ### END SOLUTION


# %% [markdown]
# ## Functions and loss classes


# %% nbgrader={"grade": false, "grade_id": "wrappers", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def mse_loss(prediction, target) -> Tensor:
    """Mean squared error; shapes must match exactly."""
    return MSEFunction.apply(_tensor(prediction), _tensor(target))


def cross_entropy(logits, targets, ignore_index: int | None = None) -> Tensor:
    """Mean cross-entropy of logits (..., C) against integer targets (...)."""
    return CrossEntropyFunction.apply(_tensor(logits), targets=targets, ignore_index=ignore_index)


class MSELoss:
    """`MSELoss()(prediction, target)`: mean squared error."""

    def forward(self, prediction, target) -> Tensor:
        return mse_loss(prediction, target)

    def __call__(self, prediction, target) -> Tensor:
        return self.forward(prediction, target)


class CrossEntropyLoss:
    """`CrossEntropyLoss(ignore_index=None)(logits, targets)`; ignored targets do not count."""

    def __init__(self, ignore_index: int | None = None):
        self.ignore_index = ignore_index

    def forward(self, logits, targets) -> Tensor:
        return cross_entropy(logits, targets, ignore_index=self.ignore_index)

    def __call__(self, logits, targets) -> Tensor:
        return self.forward(logits, targets)


# %% [markdown]
# ## Given: log-probabilities and the binary cross-entropy
#
# Two more that PyTorch code reaches for, built the same way (given, not part of the exercise):
# `log_softmax(x)` is `x - log(sum(exp(x)))` along the last axis, computed after subtracting the
# row maximum as in cross-entropy; its backward is `g - softmax(x) * sum(g)`. The binary
# cross-entropy scores a probability `p` of the positive class against a 0/1 target `t`:
# `-(t log p + (1 - t) log(1 - p))`, averaged. `BCELoss` takes probabilities (after a sigmoid)
# and clamps each log at -100 as PyTorch does, so `p = 0` gives a large finite loss;
# `BCEWithLogitsLoss` takes the logit `z` itself and computes `max(z, 0) - z t + log(1 + e^-|z|)`,
# which never overflows, with the gradient `(sigmoid(z) - t) / n`.


# %% nbgrader={"grade": false, "grade_id": "more-losses", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
class LogSoftmaxFunction(Function):
    """log softmax along `axis`: x - logsumexp(x)."""

    def forward(self, x, axis=-1):
        dims = max(x.ndim, 1)  # a scalar acts as one value along axis 0 or -1, as in PyTorch
        if not isinstance(axis, (int, np.integer)) or not -dims <= axis < dims:
            raise ShapeError(
                f"log_softmax: axis {axis!r} is out of range for an input with {x.ndim} "
                f"dimensions; use an axis in [-{dims}, {dims - 1}]"
            )
        shifted = x - x.max(axis=axis, keepdims=True)
        out = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        self.out, self.axis = out, axis
        return out

    def backward(self, grad):
        return (grad - np.exp(self.out) * grad.sum(axis=self.axis, keepdims=True),)


def log_softmax(x, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """Log-probabilities along `dim` (or `axis`, numpy's word; default the last), as PyTorch's
    `F.log_softmax(x, dim=-1)`."""
    return LogSoftmaxFunction.apply(_tensor(x), axis=_dim_or_axis("log_softmax", dim, axis))


def _same_shape(name: str, prediction, target) -> None:
    if prediction.shape != target.shape:
        raise ShapeError(
            f"{name}: input shape {prediction.shape} differs from target shape {target.shape}; "
            "give one 0/1 target per prediction"
        )


class BCEFunction(Function):
    """mean(-(t log p + (1 - t) log(1 - p))) of probabilities p; each log clamped at -100."""

    def forward(self, probs, target):
        _same_shape("binary_cross_entropy", probs, target)
        if probs.size and (probs.min() < 0 or probs.max() > 1):
            raise ValueError(
                "binary_cross_entropy: inputs must be probabilities in [0, 1]; for raw scores "
                "use binary_cross_entropy_with_logits (BCEWithLogitsLoss)"
            )
        p, self.dtype = probs.astype(np.float64), probs.dtype
        self.p, self.t, self.count = p, target.astype(np.float64), max(p.size, 1)
        with np.errstate(divide="ignore"):
            self.log_p, self.log_q = np.maximum(np.log(p), -100), np.maximum(np.log1p(-p), -100)
        logs = self.t * self.log_p + (1 - self.t) * self.log_q
        return np.asarray(-logs.sum() / self.count, dtype=probs.dtype)

    def backward(self, grad):
        p, t = self.p, self.t
        g = grad * (p - t) / np.maximum(p * (1 - p), 1e-12) / self.count
        # a target that requires grad gets one, as in PyTorch: d/dt = log(1 - p) - log p
        gt = grad * (self.log_q - self.log_p) / self.count if self.needs_grad[1] else None
        return g.astype(self.dtype), (None if gt is None else gt.astype(self.dtype))


class BCEWithLogitsFunction(Function):
    """mean(max(z, 0) - z t + log(1 + exp(-|z|))): the binary cross-entropy of sigmoid(z)."""

    def forward(self, logits, target):
        _same_shape("binary_cross_entropy_with_logits", logits, target)
        z, t = logits.astype(np.float64), target.astype(np.float64)
        self.z, self.t, self.count, self.dtype = z, t, max(z.size, 1), logits.dtype
        loss = np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z)))
        return np.asarray(loss.sum() / self.count, dtype=logits.dtype)

    def backward(self, grad):
        sigmoid = 0.5 * (1 + np.tanh(0.5 * self.z))  # 1 / (1 + e^-z) without overflow
        gt = (-grad * self.z / self.count).astype(self.dtype) if self.needs_grad[1] else None
        return (grad * (sigmoid - self.t) / self.count).astype(self.dtype), gt


def binary_cross_entropy(probs, target) -> Tensor:
    """Mean binary cross-entropy of probabilities in [0, 1] against 0/1 targets."""
    return BCEFunction.apply(_tensor(probs), _tensor(target))


def binary_cross_entropy_with_logits(logits, target) -> Tensor:
    """Mean binary cross-entropy of sigmoid(logits) against 0/1 targets, computed stably."""
    return BCEWithLogitsFunction.apply(_tensor(logits), _tensor(target))


class BCELoss:
    """`BCELoss()(probs, target)`: binary cross-entropy of probabilities (after a sigmoid)."""

    def forward(self, probs, target) -> Tensor:
        return binary_cross_entropy(probs, target)

    def __call__(self, probs, target) -> Tensor:
        return self.forward(probs, target)


class BCEWithLogitsLoss:
    """`BCEWithLogitsLoss()(logits, target)`: the sigmoid and the binary cross-entropy in one."""

    def forward(self, logits, target) -> Tensor:
        return binary_cross_entropy_with_logits(logits, target)

    def __call__(self, logits, target) -> Tensor:
        return self.forward(logits, target)


# %% [markdown]
# ## Try it
#
# A uniform guess over C classes costs log C: the loss an untrained language model starts near.

# %%
print(cross_entropy(np.zeros((4, 65)), np.arange(4)), np.log(65))

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


# %% nbgrader={"grade": true, "grade_id": "test-mse", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9, grades="mse")
def test_mse(rng):
    p, t = np.array([1.0, 2.0, 4.0]), np.array([1.0, 0.0, 1.0])
    np.testing.assert_allclose(mse_loss(p, t).data, (0 + 4 + 9) / 3, rtol=1e-6, atol=1e-9)
    p, t = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    fn = MSEFunction()
    fn.needs_grad = (True, True)
    loss = fn.forward(p, t)
    g = rng.uniform(0.5, 2.0)
    gp, gt = fn.backward(np.array(g))
    np.testing.assert_allclose(gp, g * 2 * (p - t) / p.size, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gt, -gp, rtol=1e-6, atol=1e-9)
    return {"loss": loss, "dp": gp, "dt": gt, "mse": mse_loss(p, t).data}


# %% nbgrader={"grade": true, "grade_id": "test-cross-entropy", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9, grades="cross-entropy")
def test_cross_entropy_value_and_gradient(rng):
    z = rng.normal(scale=2.0, size=(5, 4))
    t = rng.integers(0, 4, size=5)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    want = -np.mean(np.log(p[np.arange(5), t]))
    np.testing.assert_allclose(cross_entropy(z, t).data, want, rtol=1e-6, atol=1e-9)
    fn = CrossEntropyFunction()
    fn.needs_grad = (True,)
    loss = fn.forward(z, targets=t)
    (g,) = fn.backward(np.array(1.0))
    np.testing.assert_allclose(g, (p - np.eye(4)[t]) / 5, rtol=1e-6, atol=1e-9)
    sequence = rng.normal(size=(2, 3, 4))  # (batch, time, classes)
    fn = CrossEntropyFunction()
    fn.needs_grad = (True,)
    loss3 = fn.forward(sequence, targets=rng.integers(0, 4, size=(2, 3)))
    (g3,) = fn.backward(np.array(2.0))
    return {"loss": loss, "dz": g, "loss3": loss3, "dz3": g3}


# %% nbgrader={"grade": true, "grade_id": "test-ignore-index", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9, grades="cross-entropy")
def test_ignore_index_and_large_logits(rng):
    z = np.array([[1e4, 0.0], [0.0, 1e4], [3.0, 1.0]], dtype=np.float32)
    loss = cross_entropy(z, np.array([1, 1, -100]), ignore_index=-100)
    np.testing.assert_allclose(loss.data, 1e4 / 2, rtol=1e-6)  # rows 0 and 1 only
    none = cross_entropy(z, np.full(3, -100), ignore_index=-100)
    assert none.data == 0 and np.isfinite(none.data)
    logits = rng.normal(scale=3.0, size=(6, 5))
    targets = rng.integers(0, 5, size=6)
    targets[rng.permutation(6)[:2]] = -100
    fn = CrossEntropyFunction()
    fn.needs_grad = (True,)
    kept = fn.forward(logits, targets=targets, ignore_index=-100)
    (g,) = fn.backward(np.array(1.0))
    assert np.all(g[targets == -100] == 0)
    return {"loss": kept, "dz": g, "large": loss.data}
