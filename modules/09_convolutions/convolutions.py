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
# # Module 09 — Convolutions
#
# A `Linear` layer on an image treats every pixel as unrelated to its neighbours, and learns a
# separate weight for each. A stroke in the top-left corner and the same stroke one pixel to the
# right look like different inputs. A **convolution** slides one small filter (a `3 x 3` patch of
# weights, say) over every position of the image and computes the same dot product at each: the
# weights are shared across positions, so a detector learned in one place works everywhere, and the
# layer has `out_channels x in_channels x 3 x 3` weights whatever the image size.
#
# Shapes follow PyTorch: images are `(N, C, H, W)` (batch, channels, height, width), the weight
# of `Conv2d(in_channels, out_channels, kernel_size)` is `(out_channels, in_channels, kh, kw)`.
# With padding `p` and stride `s`, the output is `(H + 2p - kh) // s + 1` rows high (the same
# for the width).
#
# The module builds five layers:
#
# | layer | what it does | parameters |
# |---|---|---|
# | `Conv2d` | the same filters at every position | weight, bias |
# | `MaxPool2d` | the largest value of each window | none |
# | `AvgPool2d` | the mean of each window | none |
# | `BatchNorm2d` | each channel to mean 0 and variance 1 over the batch, then a learned scale and shift | weight, bias (and running statistics) |
# | `Flatten` | `(N, C, H, W)` to `(N, C*H*W)` for a `Linear` head | none |
#
# **Why im2col?** Written as loops, a convolution is six nested `for`s over batch, output
# channel, output row, output column and the kernel's two axes, each doing one multiply: far too
# slow in Python. *im2col* ("image to columns") copies every window the filter visits into one row
# of a matrix. The whole convolution is then a single matrix product with the filters, the
# operation BLAS does fastest. The backward is two more products and *col2im*, which adds each
# row's gradient back to the pixels it came from.

# %%
#| default_exp core.spatial

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tinytorch.core.layers import Module
from tinytorch.core.tensor import Function, ShapeError, Tensor


def _pair(value, name: str, minimum: int = 1) -> tuple[int, int]:
    """An int or a pair of ints as (rows, columns), each at least `minimum`."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    good = len(pair) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= minimum for v in pair
    )
    if not good:
        raise ValueError(f"{name} must be an integer >= {minimum} or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def _positive(value, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """How many positions a window of `kernel` takes along an axis of `size` (padded both sides)."""
    return (size + 2 * padding - kernel) // stride + 1


def _check_image(layer: str, x: Tensor, channels: int | None, kernel, padding) -> None:
    """One line naming the problem when `x` is not an (N, C, H, W) batch the layer can slide over."""
    if x.ndim != 4:
        raise ShapeError(
            f"{layer} expects a batch of images (N, C, H, W), got shape {x.shape}; "
            "add the batch axis with x.reshape(1, *x.shape) for a single image"
        )
    if channels is not None and x.shape[1] != channels:
        raise ShapeError(
            f"{layer} expects {channels} input channels, got shape {x.shape} "
            f"with {x.shape[1]}; build the layer with in_channels={x.shape[1]}"
        )
    for axis, name in ((0, "height"), (1, "width")):
        if x.shape[2 + axis] + 2 * padding[axis] < kernel[axis]:
            raise ShapeError(
                f"{layer}: the kernel {kernel} is larger than the padded input "
                f"{x.shape[2] + 2 * padding[0]}x{x.shape[3] + 2 * padding[1]} ({name}); "
                "use a smaller kernel or more padding"
            )


# %% [markdown]
# ## im2col and col2im
#
# Pad the images with zeros, then list the windows. `sliding_window_view(x, (kh, kw), axis=(2, 3))`
# is a *view* of every `kh x kw` window, shape `(N, C, H', W', kh, kw)` with `H' = H + 2p - kh + 1`;
# keeping every `s`-th row and column of windows (`[:, :, ::sh, ::sw]`) gives the strided
# positions `(N, C, OH, OW, kh, kw)`. Moving the channel axis next to the kernel axes and
# reshaping makes the matrix `cols` of shape `(N * OH * OW, C * kh * kw)`: one row per output
# position, holding the pixels its filter sees. The reshape is the one copy.
#
# col2im goes the other way for the backward: the gradient of `cols` has one entry per
# (position, channel, kernel offset), and each pixel collects the entries of every window it sat
# in. Loop over the `kh * kw` kernel offsets `(i, j)` only: for each, the entries of all
# positions and channels land on a strided grid of the padded image, `dx[:, :, i : i + sh*OH : sh,
# j : j + sw*OW : sw]`, in one vectorised `+=`. Then cut the padding off.


# %% nbgrader={"grade": false, "grade_id": "im2col", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def im2col(x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple) -> np.ndarray:
    """Every window of the (N, C, H, W) array x as a row: (N * OH * OW, C * kh * kw)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c = x.shape[:2]
    ### BEGIN SOLUTION
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    windows = sliding_window_view(padded, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    oh, ow = windows.shape[2:4]
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    ### END SOLUTION


def col2im(cols: np.ndarray, shape: tuple, kernel: tuple, stride: tuple, padding: tuple):
    """The adjoint of im2col: add each row's entries back to the pixels of its window."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = shape
    oh, ow = output_size(h, kh, sh, ph), output_size(w, kw, sw, pw)
    ### BEGIN SOLUTION
    patches = cols.reshape(n, oh, ow, c, kh, kw).transpose(
        0, 3, 4, 5, 1, 2
    )  # (N, C, kh, kw, OH, OW)
    dx = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            dx[:, :, i : i + sh * oh : sh, j : j + sw * ow : sw] += patches[:, :, i, j]
    return dx[:, :, ph : ph + h, pw : pw + w]
    ### END SOLUTION


# %% [markdown]
# ## `Conv2d`: one fused function
#
# The loops-first version, to read, not to run: for each image `b`, output channel `o` and output
# position `(r, q)`,
#
# ```python
# out[b, o, r, q] = bias[o] + sum(
#     weight[o, c, i, j] * xp[b, c, r * sh + i, q * sw + j]
#     for c in range(C) for i in range(kh) for j in range(kw)
# )
# ```
#
# with `xp` the padded input. The sum over `(c, i, j)` is a dot product of one row of `cols` with
# one filter, flattened to `C * kh * kw` values. So with `W = weight.reshape(O, -1)`:
#
# | | formula (g the output gradient as `(N * OH * OW, O)`) |
# |---|---|
# | forward | `cols @ W.T + bias`, reshaped to `(N, OH, OW, O)`, channels moved to axis 1 |
# | weight gradient | `g.T @ cols`, reshaped to the weight's shape |
# | bias gradient | `g` summed over rows |
# | input gradient | `col2im(g @ W)` |
#
# Save `cols` for the weight gradient only when the weight needs one, and the weight for the
# input gradient only when the input needs one (`self.needs_grad[i]` says whether input `i` of
# `forward(x, weight, bias)` needs a gradient). Name the saved arrays as you like: the tests look
# at what the function keeps on `self` after `forward`, and check that nothing there holds the
# weight when only the weight needs a gradient, and nothing the size of `cols` when only the input
# does.


# %% nbgrader={"grade": false, "grade_id": "conv-function", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Conv2dFunction(Function):
    """A 2-D convolution (cross-correlation, as in PyTorch) via im2col: one node, one GEMM."""

    def forward(self, x, weight, bias=None, *, stride=(1, 1), padding=(0, 0)):
        out_channels, _, kh, kw = weight.shape
        n, _, h, w = x.shape
        self.x_shape, self.kernel, self.stride, self.padding = x.shape, (kh, kw), stride, padding
        self.has_bias = bias is not None
        oh, ow = (
            output_size(h, kh, stride[0], padding[0]),
            output_size(w, kw, stride[1], padding[1]),
        )
        ### BEGIN SOLUTION
        cols = im2col(x, (kh, kw), stride, padding)  # (N * OH * OW, C * kh * kw)
        flat = weight.reshape(out_channels, -1)  # (O, C * kh * kw)
        self.cols = cols if self.needs_grad[1] else None
        self.flat = flat if self.needs_grad[0] else None
        out = cols @ flat.T  # (N * OH * OW, O)
        if bias is not None:
            out += bias
        return out.reshape(n, oh, ow, out_channels).transpose(0, 3, 1, 2)
        ### END SOLUTION

    def backward(self, grad):
        gx = gw = gb = None
        ### BEGIN SOLUTION
        out_channels = grad.shape[1]
        g = grad.transpose(0, 2, 3, 1).reshape(-1, out_channels)  # (N * OH * OW, O)
        if self.needs_grad[0]:
            gx = col2im(g @ self.flat, self.x_shape, self.kernel, self.stride, self.padding)
        if self.needs_grad[1]:
            gw = (g.T @ self.cols).reshape(out_channels, self.x_shape[1], *self.kernel)
        if self.has_bias and self.needs_grad[2]:
            gb = g.sum(axis=0)
        ### END SOLUTION
        return (gx, gw, gb) if len(self.needs_grad) == 3 else (gx, gw)


# %% [markdown]
# The layer checks its arguments and its input, and initialises like PyTorch: weight and bias
# uniform in `±1/sqrt(fan_in)`, where `fan_in = in_channels * kh * kw` is the number of inputs one
# output sums (the same rule as `Linear`).


# %% nbgrader={"grade": false, "grade_id": "conv2d", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Conv2d(Module):
    """2-D convolution over (N, C, H, W) images; weight (out_channels, in_channels, kh, kw)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True):
        self.in_channels = _positive(in_channels, "Conv2d: in_channels")
        self.out_channels = _positive(out_channels, "Conv2d: out_channels")
        self.kernel_size = _pair(kernel_size, "Conv2d: kernel_size")
        self.stride = _pair(stride, "Conv2d: stride")
        self.padding = _pair(padding, "Conv2d: padding", minimum=0)
        ### BEGIN SOLUTION
        shape = (self.out_channels, self.in_channels, *self.kernel_size)
        bound = 1.0 / np.sqrt(self.in_channels * self.kernel_size[0] * self.kernel_size[1])
        self.weight = Tensor(np.random.uniform(-bound, bound, shape), requires_grad=True)
        self.bias = (
            Tensor(np.random.uniform(-bound, bound, self.out_channels), requires_grad=True)
            if bias
            else None
        )
        ### END SOLUTION

    def forward(self, x) -> Tensor:
        x = _as_tensor(x)
        _check_image(repr(self), x, self.in_channels, self.kernel_size, self.padding)
        options = {"stride": self.stride, "padding": self.padding}
        ### BEGIN SOLUTION
        if self.bias is None:
            return Conv2dFunction.apply(x, self.weight, **options)
        return Conv2dFunction.apply(x, self.weight, self.bias, **options)
        ### END SOLUTION

    def __repr__(self):
        return (
            f"Conv2d({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, bias={self.bias is not None})"
        )


# %% [markdown]
# ## Pooling
#
# A pooling layer shrinks each channel by summarising every window: `MaxPool2d(2)` keeps the
# largest of each `2 x 2` block (a feature was seen somewhere in it), `AvgPool2d(2)` their mean.
# The stride defaults to the kernel size, so windows tile the image without overlap.
#
# Both reuse the window view of im2col, this time keeping channels apart: `(N, C, OH, OW, kh*kw)`.
#
# - **Max**: the output is the maximum of the last axis; its gradient goes only to the entry that
#   won, `argmax` (the first one on a tie, as in PyTorch). Padding is `-inf`, so it never wins.
# - **Average**: the output is the mean; every entry of a window gets `g / (kh * kw)`. Padded
#   zeros count in the mean, PyTorch's default (`count_include_pad=True`).
#
# The backward of both is your col2im: the given `_scatter` lays out each window entry's gradient
# as the rows of im2col, one column per (channel, kernel offset), and col2im adds them back.


# %% nbgrader={"grade": false, "grade_id": "pool-functions", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _windows(x, kernel, stride, padding, fill):
    """(N, C, OH, OW, kh * kw): every pooling window of x, padded with `fill`."""
    (ph, pw) = padding
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    view = sliding_window_view(x, kernel, axis=(2, 3))[:, :, :: stride[0], :: stride[1]]
    return view.reshape(*view.shape[:4], kernel[0] * kernel[1])


def _scatter(per_offset, shape, kernel, stride, padding, dtype):
    """Add per_offset(i, j), an (N, C, OH, OW) array, onto the window entries at offset (i, j):
    laid out as im2col's rows, (N * OH * OW, C * kh * kw), and added back by col2im."""
    offsets = [per_offset(i, j) for i in range(kernel[0]) for j in range(kernel[1])]
    entries = np.stack(offsets, axis=-1).astype(dtype, copy=False)  # (N, C, OH, OW, kh * kw)
    n, c, oh, ow, k = entries.shape
    cols = entries.transpose(0, 2, 3, 1, 4).reshape(n * oh * ow, c * k)
    return col2im(cols, shape, kernel, stride, padding)


class MaxPool2dFunction(Function):
    def forward(self, x, *, kernel, stride, padding):
        self.shape, self.kernel, self.stride, self.padding = x.shape, kernel, stride, padding
        ### BEGIN SOLUTION
        windows = _windows(x, kernel, stride, padding, -np.inf)
        self.winner = windows.argmax(axis=-1)  # (N, C, OH, OW): which entry of each window
        return np.take_along_axis(windows, self.winner[..., None], axis=-1)[..., 0]
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        kw = self.kernel[1]

        def share(i, j):
            return np.where(self.winner == i * kw + j, grad, 0)

        return (_scatter(share, self.shape, self.kernel, self.stride, self.padding, grad.dtype),)
        ### END SOLUTION


class AvgPool2dFunction(Function):
    def forward(self, x, *, kernel, stride, padding):
        self.shape, self.kernel, self.stride, self.padding = x.shape, kernel, stride, padding
        ### BEGIN SOLUTION
        return _windows(x, kernel, stride, padding, 0.0).mean(axis=-1)
        ### END SOLUTION

    def backward(self, grad):
        ### BEGIN SOLUTION
        share = grad / (self.kernel[0] * self.kernel[1])
        return (
            _scatter(
                lambda i, j: share, self.shape, self.kernel, self.stride, self.padding, grad.dtype
            ),
        )
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "pool-layers", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
class _Pool2d(Module):
    function: type[Function]

    def __init__(self, kernel_size, stride=None, padding=0):
        name = type(self).__name__
        self.kernel_size = _pair(kernel_size, f"{name}: kernel_size")
        self.stride = self.kernel_size if stride is None else _pair(stride, f"{name}: stride")
        self.padding = _pair(padding, f"{name}: padding", minimum=0)
        if any(2 * p > k for p, k in zip(self.padding, self.kernel_size)):
            raise ValueError(
                f"{name}: padding {self.padding} may be at most half the kernel "
                f"{self.kernel_size}, as in PyTorch; use less padding"
            )

    def forward(self, x) -> Tensor:
        x = _as_tensor(x)
        _check_image(repr(self), x, None, self.kernel_size, self.padding)
        return self.function.apply(
            x, kernel=self.kernel_size, stride=self.stride, padding=self.padding
        )

    def __repr__(self):
        return (
            f"{type(self).__name__}(kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding})"
        )


class MaxPool2d(_Pool2d):
    """The largest value of each window, per channel; stride defaults to the kernel size."""

    function = MaxPool2dFunction


class AvgPool2d(_Pool2d):
    """The mean of each window, per channel, padded zeros included (PyTorch's default)."""

    function = AvgPool2dFunction


# %% [markdown]
# ## `BatchNorm2d`
#
# Deep networks train faster when each layer's inputs keep a steady scale. Batch normalisation
# standardises every channel over the batch and the image, the `N * H * W` values `m` of one
# channel, then applies a learned per-channel scale `weight` (starting at 1) and shift `bias`
# (starting at 0):
#
# `xhat = (x - mean) / sqrt(var + eps)`, `y = weight * xhat + bias`, with `var` the biased
# variance (divided by `m`).
#
# **Train and eval.** At inference a prediction must not depend on which other images share the
# batch. So while training the layer also keeps an exponential moving average of the statistics,
# `running = (1 - momentum) * running + momentum * batch` (PyTorch stores the *unbiased* variance,
# divided by `m - 1`, in `running_var`), and in eval mode it normalises with those instead.
# The running statistics are not parameters: the optimizer never touches them. They are *buffers*
# (module 03's `register_buffer`): `state_dict()` saves them and `load_state_dict()` restores them
# in place, so a model saved after training predicts the same in eval mode once reloaded. Update
# them in place (`self.running_mean[:] = ...`) or assign new arrays: both are saved.
#
# **One value per channel.** With `m = 1` (a batch of one 1 x 1 image) the variance of the batch
# is 0 and the unbiased one divides by zero, so in training `forward` raises a `ShapeError` whose
# message says the layer needs "more than one value per channel" and names the input's shape
# (PyTorch refuses the same input). In eval mode the running statistics are used and any batch
# works.
#
# **The backward.** In eval mode mean and variance are constants: `dx = g * weight / sqrt(var +
# eps)`. In training they depend on `x` too. Writing `d = g * weight` and averaging over the `m`
# values of each channel,
#
# `dx = (d - mean(d) - xhat * mean(d * xhat)) / sqrt(var + eps)`:
#
# the gradient loses its component along the constant (the mean is subtracted) and along `xhat`
# (the scale is divided out). `dweight = sum(g * xhat)` and `dbias = sum(g)` over `(N, H, W)`.
#
# The layer computes the statistics and updates the running averages; the function receives the
# mean and variance to use and a flag saying whether they came from this batch.


# %% nbgrader={"grade": false, "grade_id": "batchnorm-function", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
AXES = (0, 2, 3)  # the axes one channel's statistics run over


class BatchNorm2dFunction(Function):
    """y = weight * (x - mean) / sqrt(var + eps) + bias, per channel, fused."""

    def forward(self, x, weight, bias, *, mean, var, eps, batch_stats):
        self.batch_stats = batch_stats
        ### BEGIN SOLUTION
        shape = (1, -1, 1, 1)
        self.inv_std = (1.0 / np.sqrt(var + eps)).astype(x.dtype).reshape(shape)
        self.xhat = (x - mean.reshape(shape).astype(x.dtype)) * self.inv_std
        self.weight = weight.reshape(shape)
        return self.xhat * self.weight + bias.reshape(shape)
        ### END SOLUTION

    def backward(self, grad):
        gx = gw = gb = None
        ### BEGIN SOLUTION
        if self.needs_grad[0]:
            d = grad * self.weight
            if self.batch_stats:
                d = d - d.mean(axis=AXES, keepdims=True)
                d -= self.xhat * (grad * self.weight * self.xhat).mean(axis=AXES, keepdims=True)
            gx = d * self.inv_std
        if self.needs_grad[1]:
            gw = (grad * self.xhat).sum(axis=AXES)
        if self.needs_grad[2]:
            gb = grad.sum(axis=AXES)
        ### END SOLUTION
        return gx, gw, gb


# %% nbgrader={"grade": false, "grade_id": "batchnorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class BatchNorm2d(Module):
    """Normalise each channel over (N, H, W); running statistics for eval mode."""

    def __init__(self, num_features, eps=1e-05, momentum=0.1):
        self.num_features = _positive(num_features, "BatchNorm2d: num_features")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm2d: momentum must be in [0, 1], got {momentum!r}")
        self.eps, self.momentum = float(eps), float(momentum)
        self.weight = Tensor(np.ones(self.num_features), requires_grad=True)
        self.bias = Tensor(np.zeros(self.num_features), requires_grad=True)
        self.register_buffer("running_mean", np.zeros(self.num_features, self.weight.dtype))
        self.register_buffer("running_var", np.ones(self.num_features, self.weight.dtype))

    def forward(self, x) -> Tensor:
        x = _as_tensor(x)
        if x.ndim != 4 or x.shape[1] != self.num_features:
            raise ShapeError(
                f"BatchNorm2d({self.num_features}) expects images (N, {self.num_features}, H, W), "
                f"got shape {x.shape}; build it with num_features set to the input's channels"
            )
        ### BEGIN SOLUTION
        if self.training:
            m = x.shape[0] * x.shape[2] * x.shape[3]
            if m < 2:
                raise ShapeError(
                    f"BatchNorm2d in training needs more than one value per channel, got shape "
                    f"{x.shape}; use a larger batch or call .eval()"
                )
            mean, var = x.data.mean(axis=AXES), x.data.var(axis=AXES)
            keep = 1.0 - self.momentum
            self.running_mean[:] = keep * self.running_mean + self.momentum * mean
            self.running_var[:] = keep * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mean, var = self.running_mean, self.running_var
        return BatchNorm2dFunction.apply(
            x, self.weight, self.bias, mean=mean, var=var, eps=self.eps, batch_stats=self.training
        )
        ### END SOLUTION

    def __repr__(self):
        return f"BatchNorm2d({self.num_features}, eps={self.eps}, momentum={self.momentum})"


# %% [markdown]
# ## `Flatten`
#
# Between the convolutional part and a `Linear` head, each image's `(C, H, W)` block becomes one
# row: `Flatten()` reshapes axes `start_dim` to `end_dim` (PyTorch's defaults: 1 and -1) into one,
# keeping the batch axis. The tensor's `reshape` already knows its backward.


# %% nbgrader={"grade": false, "grade_id": "flatten", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Flatten(Module):
    """Merge axes start_dim..end_dim into one (by default, everything but the batch axis)."""

    def __init__(self, start_dim=1, end_dim=-1):
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x) -> Tensor:
        x = _as_tensor(x)
        start, end = self.start_dim % max(x.ndim, 1), self.end_dim % max(x.ndim, 1)
        if x.ndim == 0 or start > end:
            raise ShapeError(
                f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim}) cannot flatten "
                f"shape {x.shape}; start_dim must come before end_dim"
            )
        ### BEGIN SOLUTION
        return x.reshape(*x.shape[:start], -1, *x.shape[end + 1 :])
        ### END SOLUTION

    def __repr__(self):
        return f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim})"


# %% [markdown]
# ## Try it

# %%
np.random.seed(0)
net = [Conv2d(1, 4, 3, padding=1), BatchNorm2d(4), MaxPool2d(2), Flatten()]
x = Tensor(np.random.standard_normal((2, 1, 8, 8)))
for layer in net:
    x = layer(x)
print(x.shape, net[0].weight.shape)

# %% [markdown]
# ## Tests
# Each graded cell is a probe: it runs your layers on random inputs and returns their outputs and
# gradients, which the grader compares with the reference's.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded
from tinytorch.core.tensor import precision


# %% nbgrader={"grade": true, "grade_id": "test-im2col", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9, grades="im2col")
def test_im2col(rng):
    x = rng.standard_normal((2, 3, 6, 5))
    cols = im2col(x, (3, 2), (2, 1), (1, 0))
    assert cols.shape == (2 * 3 * 4, 3 * 3 * 2)
    back = col2im(np.ones_like(cols), x.shape, (3, 2), (2, 1), (1, 0))
    assert back.shape == x.shape
    return {"cols": cols, "counts": back}


# %% nbgrader={"grade": true, "grade_id": "test-conv2d", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-8, grades=("conv-function", "conv2d"))
def test_conv2d(rng):
    with precision(np.float64):
        np.random.seed(int(rng.integers(1000)))
        layer = Conv2d(2, 3, (3, 2), stride=(2, 1), padding=1)
        x = Tensor(rng.standard_normal((2, 2, 7, 6)), requires_grad=True)
        y = layer(x)
        assert y.shape == (2, 3, 4, 7)
        y.backward(rng.standard_normal(y.shape))
    return {
        "weight": layer.weight.data,
        "y": y.data,
        "dx": x.grad,
        "dw": layer.weight.grad,
        "db": layer.bias.grad,
    }


# %% nbgrader={"grade": true, "grade_id": "test-pooling", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-8, grades="pool-functions")
def test_pooling(rng):
    result = {}
    with precision(np.float64):
        for pool in (MaxPool2d(2), MaxPool2d(3, stride=2, padding=1), AvgPool2d((2, 3), padding=1)):
            x = Tensor(rng.standard_normal((2, 3, 7, 8)), requires_grad=True)
            y = pool(x)
            y.backward(rng.standard_normal(y.shape))
            name = type(pool).__name__ + str(len(result) // 2)
            result[name + "_y"], result[name + "_dx"] = y.data, x.grad
    return result


# %% nbgrader={"grade": true, "grade_id": "test-batchnorm", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-8, grades=("batchnorm-function", "batchnorm"))
def test_batchnorm(rng):
    with precision(np.float64):
        norm = BatchNorm2d(3)
        norm.weight.data[:] = rng.uniform(0.5, 2.0, 3)
        x = Tensor(rng.standard_normal((4, 3, 5, 2)) * 3 + 1, requires_grad=True)
        y = norm(x)
        y.backward(rng.standard_normal(y.shape))
        norm.eval()
        x2 = Tensor(rng.standard_normal((2, 3, 5, 2)), requires_grad=True)
        y2 = norm(x2)
        y2.backward(rng.standard_normal(y2.shape))
    assert np.allclose(y.data.mean(axis=(0, 2, 3)), norm.bias.data, atol=1e-8)
    return {
        "y": y.data,
        "dx": x.grad,
        "dw": norm.weight.grad,
        "db": norm.bias.grad,
        "running": np.stack([norm.running_mean, norm.running_var]),
        "y_eval": y2.data,
        "dx_eval": x2.grad,
    }


# %% nbgrader={"grade": true, "grade_id": "test-flatten", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(grades="flatten")
def test_flatten(rng):
    x = Tensor(rng.standard_normal((2, 3, 4, 5)), requires_grad=True)
    y = Flatten()(x)
    assert y.shape == (2, 60)
    y.backward(np.arange(120.0).reshape(2, 60))
    return {"y": y.data, "dx": x.grad, "inner": Flatten(1, 2)(x).data}
