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
        return np.asarray(np.vdot(self.diff, self.diff) / self.count, dtype=prediction.dtype)
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
# the shifted logits, pick each row's target entry, and turn the shifted logits into softmax
# probabilities *in place* for the backward (one `(N, C)` array in all). The backward subtracts 1
# at each target, zeroes the ignored rows and scales by `grad / count`.


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
        picked = shifted[rows, t]  # (N,) the target's shifted logit
        probs = np.exp(shifted, out=shifted)  # reuse the buffer: shifted is no longer needed
        total = probs.sum(axis=1)
        log_probs = picked - np.log(total)  # (N,) log p(target)
        loss = -np.sum(log_probs[keep]) / max(self.count, 1)

        if self.needs_grad[0]:
            probs /= total[:, None]  # softmax, kept for the backward
            self.probs, self.t, self.keep, self.shape = probs, t, keep, logits.shape
        return np.asarray(loss, dtype=logits.dtype)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        g = self.probs  # (N, C), updated in place: the graph runs backward once
        g[np.arange(self.t.size), self.t] -= 1
        g *= (self.keep * (grad / max(self.count, 1))).astype(g.dtype)[:, None]
        self.probs = None
        return (g.reshape(self.shape),)
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
@graded(rtol=1e-6, atol=1e-9)
def test_mse(rng):
    p, t = np.array([1.0, 2.0, 4.0]), np.array([1.0, 0.0, 1.0])
    np.testing.assert_allclose(mse_loss(p, t).data, (0 + 4 + 9) / 3, rtol=1e-6)
    p, t = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    fn = MSEFunction()
    fn.needs_grad = (True, True)
    loss = fn.forward(p, t)
    g = rng.uniform(0.5, 2.0)
    gp, gt = fn.backward(np.array(g))
    np.testing.assert_allclose(gp, g * 2 * (p - t) / p.size)
    np.testing.assert_allclose(gt, -gp)
    return {"loss": loss, "dp": gp, "dt": gt, "mse": mse_loss(p, t).data}


# %% nbgrader={"grade": true, "grade_id": "test-cross-entropy", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9)
def test_cross_entropy_value_and_gradient(rng):
    z = rng.normal(scale=2.0, size=(5, 4))
    t = rng.integers(0, 4, size=5)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    want = -np.mean(np.log(p[np.arange(5), t]))
    np.testing.assert_allclose(cross_entropy(z, t).data, want, rtol=1e-6)
    fn = CrossEntropyFunction()
    fn.needs_grad = (True,)
    loss = fn.forward(z, targets=t)
    (g,) = fn.backward(np.array(1.0))
    np.testing.assert_allclose(g, (p - np.eye(4)[t]) / 5, rtol=1e-6)
    sequence = rng.normal(size=(2, 3, 4))  # (batch, time, classes)
    fn = CrossEntropyFunction()
    fn.needs_grad = (True,)
    loss3 = fn.forward(sequence, targets=rng.integers(0, 4, size=(2, 3)))
    (g3,) = fn.backward(np.array(2.0))
    return {"loss": loss, "dz": g, "loss3": loss3, "dz3": g3}


# %% nbgrader={"grade": true, "grade_id": "test-ignore-index", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9)
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
