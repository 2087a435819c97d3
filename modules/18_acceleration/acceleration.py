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
# # Module 18 — Acceleration: the same numbers, sooner
#
# Modules 02 to 13 wrote every layer the readable way: attention from a few Tensor operations,
# LayerNorm with a mean and a variance, Adam as its three-line update. Each operation allocates a
# fresh array, and autograd keeps every intermediate alive for the backward: on a CPU that costs
# time (memory traffic, Python per node) and memory. This module writes the fast versions, each
# checked to compute the same numbers, forward and every gradient, as the lesson it replaces:
#
# | what | lesson | the fast version |
# |---|---|---|
# | softmax | 02 | in place: the scores become the weights; fast row reductions |
# | attention | 12 | one `Function`, blocks of the batch; keeps the weights or none |
# | q, k, v projections | 12 | one node, one matrix product for all three, packed heads |
# | LayerNorm | 13 | one `Function`, reductions as matrix-vector products, blocks of rows |
# | GELU | 02 | in place, in cache-sized blocks; optionally recomputed instead of kept |
# | embedding gradient | 11 | rows summed per id by sorting, not by `np.add.at` |
# | AdamW | 06 | the update in one scratch buffer: no temporaries per parameter |
#
# The given `accelerate(model)` puts your kernels into any model; then you measure what each buys.

# %%
#| default_exp accel.kernels

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
"""Fast kernels (module 18): fused attention, packed projections, fused LayerNorm and GELU."""

from __future__ import annotations

import math

import numpy as np

from tinytorch.accel.blocking import mean_last, sum_leading  # given: fast row and column sums
from tinytorch.accel.fused import BlockedAttention, BlockedGELU, BlockedLayerNorm  # given loops
from tinytorch.core.tensor import Function

GELU_SCALE = math.sqrt(2.0 / math.pi)  # GELU's tanh approximation, as module 02 writes it
GELU_CUBIC = 0.044715


# %% [markdown]
# ## 1. Softmax in place
#
# Module 02's softmax makes three arrays; here the `(B, H, T, T)` scores, attention's largest
# array, *become* the weights: subtract the row maximum, exponentiate and multiply by the
# reciprocal of the row sums, all in place (`np.subtract(s, peak, out=s)`). numpy reduces many
# short rows slowly: take the sums as one product with ones (`scores @ np.ones(n)`) and the maximum
# with a starting value, `scores.max(axis=-1, keepdims=True, initial=-np.inf)` (2.5x faster).
# A row whose keys are all blocked is all -inf, and -inf - (-inf) is NaN: use 0 as that row's
# maximum (it then exponentiates to zeros) and leave the all-zero row as it is instead of
# dividing by zero. Given `lse`, also write each row's log-sum-exp `log Σ_j exp(s_j)` into it,
# `peak + log(total)` (0 for a blocked row): `softmax(s) = exp(s − lse)`, no max, no sum (sec. 2).


# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def softmax_rows_(scores: np.ndarray, lse: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis, written into `scores` itself; all -inf rows become zeros.
    `lse` (..., 1), if given, receives each row's log-sum-exp (0 for an all -inf row)."""
    ### BEGIN SOLUTION
    peak = scores.max(axis=-1, keepdims=True, initial=-np.inf)  # the starting value: faster
    peak[np.isneginf(peak)] = 0  # fully blocked row: exp(-inf - 0) = 0, not nan
    np.subtract(scores, peak, out=scores)
    np.exp(scores, out=scores)
    total = (scores @ np.ones(scores.shape[-1], scores.dtype))[..., None]  # the row sums
    total[total == 0] = 1  # fully blocked row stays all zeros
    if lse is not None:
        np.add(np.log(total), peak, out=lse)  # log Σ exp(s) = peak + log Σ exp(s − peak)
    np.reciprocal(total, out=total)
    scores *= total
    ### END SOLUTION
    return scores


# %% [markdown]
# ## 2. Attention as one node
#
# Module 12 built attention from Tensor operations; autograd kept the scores, the masked scores
# and the weights, and walked four nodes back. As one `Function` the forward keeps only what the
# backward needs, and the backward is four matrix products and one correction. With
# `W = softmax(S)`, `S = q kᵀ / sqrt(d) + mask`, `O = W v` and the output gradient `dO`:
#
#     dv = Wᵀ dO        dW = dO vᵀ        dS = W ⊙ (dW − rowsum(dW ⊙ W))
#     dq = dS k / sqrt(d)                 dk = dSᵀ q / sqrt(d)
#
# The correction `rowsum(dW ⊙ W)`, a `(T_q, T_k)` product, equals `rowsum(dO ⊙ O)`
# (`Σ_j dW_ij W_ij = Σ_j Σ_e dO_ie v_je W_ij = Σ_e dO_ie O_ie`), a `(T_q, d)` one. Scale kᵀ, not
# the scores (`T·d` multiplications, not `T·T`), into a C-order copy: BLAS multiplies by a
# contiguous `(d, T)` matrix in about a third less time than by a transposed view (vᵀ likewise).
# Scale `dO` once (`g = dO / sqrt(d)`): `dW` and the correction, made from it, come out scaled,
# and `dS` needs no pass of its own; the correction is `np.einsum("...d,...d->...", g, out)`.
#
# The given `BlockedAttention` (`tinytorch/accel/fused.py`) runs both directions a block of the
# batch at a time (`head_blocks`: about `BLOCK` score values each), so a block's scores, weights
# and `dS` stay in the core's cache from the product that makes them to the one that uses them.
# `FusedAttention` is that loop with the two kernels you write for one block:
# `_attention_weights(q, k, mask, scale, out, lse, known)` puts the weights into `out` (None: a
# fresh array), and `_attention_grads(w, q, k, v, out, grad, scale, dq, dk, dv)` writes the
# gradients into the arrays it is handed (`np.matmul(a, b, out=dq)`; None: not needed). The given
# code stores `(B, H, T, d)` outputs and gradients in `(B, T, H, d)` memory order (`heads_buffer`):
# merging the heads into `(B, T, H·d)`, and section 3's backward, then need no copy.
#
# **Recomputation.** The weights are `(B, H, T, T)` per layer, the largest array training keeps.
# With `recompute=True` the forward keeps none of them, only each row's log-sum-exp (`lse`,
# `(..., T_q, 1)`), and the backward recomputes each block's from q, k and the mask, in cache, as
# `exp(s − lse)` (`known=True`): one more product per layer, no maximum, no sum, no division.
# `forward` takes three arrays or one packed `(3, ..., T, d)` array (section 3's output), for
# which the backward returns one packed gradient; `on_weights`, if given, gets the weights.


# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _attention_weights(q, k, mask, scale, out=None, lse=None, known=False) -> np.ndarray:
    """softmax(q kᵀ · scale + mask) into `out` (None: fresh); rows' log-sum-exp to/from `lse`."""
    ### BEGIN SOLUTION
    k_t = np.multiply(np.swapaxes(k, -1, -2), scale, order="C")  # kᵀ · scale, contiguous
    scores = np.matmul(q, k_t, out=out)  # (..., Tq, Tk)
    if mask is not None:
        scores += mask
    if known:  # exp(s − lse) is the softmax: no maximum, no sum
        return np.exp(np.subtract(scores, lse, out=scores), out=scores)
    return softmax_rows_(scores, lse)
    ### END SOLUTION


def _attention_grads(w, q, k, v, out, grad, scale, dq, dk, dv) -> None:
    """One block's gradients, written into dq, dk and dv (None: not needed)."""
    ### BEGIN SOLUTION
    if dv is not None:
        np.matmul(np.swapaxes(w, -1, -2), grad, out=dv)  # (..., Tk, Dv)
    if dq is None and dk is None:
        return
    g = grad * scale  # scales dW and the correction, so dS comes out scaled
    ds = g @ np.ascontiguousarray(np.swapaxes(v, -1, -2))  # dW / sqrt(d), (..., Tq, Tk)
    ds -= np.einsum("...d,...d->...", g, out)[..., None]  # rowsum(dW * W)
    ds *= w
    if dq is not None:
        np.matmul(ds, k, out=dq)  # (..., Tq, D)
    if dk is not None:
        np.matmul(np.swapaxes(ds, -1, -2), q, out=dk)  # (..., Tk, D)
    ### END SOLUTION


class FusedAttention(BlockedAttention):
    """softmax(q kᵀ / sqrt(d) + mask) v as one node: the given block loop with your kernels."""

    block_weights, block_grads = staticmethod(_attention_weights), staticmethod(_attention_grads)


# %% [markdown]
# ## 3. The three projections as one node
#
# Module 12's layer projects `x` three times and splits each into heads: nine nodes.
# `QKVProjection` puts the n weights side by side, `W = [W_1 ... W_n]` `(E, n·E)`, and makes all n
# projections of the `(B·T, E)` rows with one product `(B·T, n·E)`; read as `(B, T, n, H, D)` and
# transposed, it is the heads `(n, B, H, T, D)` (`(B, H, T, D)` for n = 1), a strided view. Add
# the biases `[b_1 ... b_n]` to the product in place, then copy the view once
# (`np.ascontiguousarray`): attention's products on strided heads cost more than the copy.
# The backward reads `g` `(B·T, n·E)` in that order (section 2 stores it so): `dx = g Wᵀ`,
# `dW = xᵀ g` (column blocks `dW_i`), `db = Σ_rows g`, two products for all n; skip unneeded ones.


# %% nbgrader={"grade": false, "grade_id": "projection", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class QKVProjection(Function):
    """x @ W_i + b_i for n projections at once, split into heads: (n, B, H, T, D)."""

    def forward(self, x, *params, num_heads: int, has_bias: bool):
        n = len(params) // 2 if has_bias else len(params)
        self.n, self.has_bias, self.x_shape = n, has_bias, x.shape
        batch, steps, embed = x.shape
        rows = x.reshape(-1, embed)  # (B*T, E)
        weights, biases = params[:n], params[n:]
        self.rows = rows if any(self.needs_grad[1:]) else None
        self.weights = weights if self.needs_grad[0] else None
        weight = np.concatenate(weights, axis=1)  # (E, n*E): W_1 ... W_n side by side
        ### BEGIN SOLUTION
        y = rows @ weight  # (B*T, n*E): every projection in one product
        if has_bias:
            y += np.concatenate(biases)  # b_1 ... b_n, each added to its block of columns
        heads = y.reshape(batch, steps, n, num_heads, -1)  # (B, T, n, H, D)
        out = np.ascontiguousarray(heads.transpose(2, 0, 3, 1, 4))  # (n, B, H, T, D)
        ### END SOLUTION
        return out[0] if n == 1 else out

    def backward(self, grad):
        n, (batch, steps, _) = self.n, self.x_shape
        need_w, need_b = self.needs_grad[1 : 1 + n], self.needs_grad[1 + n :]
        gx = None
        gw, gb = [None] * n, [None] * len(need_b)
        ### BEGIN SOLUTION
        grad = grad.reshape(n, *grad.shape[-4:])  # (n, B, H, T, D)
        g = grad.transpose(1, 3, 0, 2, 4).reshape(batch * steps, -1)  # (B*T, n*E)
        if self.needs_grad[0]:
            weight = np.concatenate(self.weights, axis=1)  # (E, n*E), as in the forward
            gx = (g @ weight.T).reshape(self.x_shape)  # Σ g_i W_iᵀ in one product
        if any(need_w):
            gw = np.split(self.rows.T @ g, n, axis=1)  # (E, n*E) -> the n (E, E) blocks
        if self.has_bias and any(need_b):
            gb = np.split(g.sum(axis=0), n)
        ### END SOLUTION
        return (gx, *gw, *gb)


# %% [markdown]
# ## 4. LayerNorm as one node
#
# Module 13's LayerNorm, `(x - mean) / sqrt(var + eps) * gamma + beta`, is six nodes. As one
# `Function`, with `xc = x − mean`, `rstd = 1 / sqrt(var + eps)` and `x_hat = xc · rstd`:
#
#     g = dy · gamma
#     dx = rstd · (g − mean(g) − x_hat · mean(g · x_hat))
#     dgamma = Σ dy · x_hat          dbeta = Σ dy          (over every leading axis)
#
# numpy's `mean` and `sum` are slow over many short rows; matrix-vector products are faster: the
# given `mean_last(a)` (`a.mean(axis=-1, keepdims=True)`), `sum_leading(a)` (the sum over every
# axis but the last) and `np.einsum("...c,...c->...", xc, xc)` (sums of squares, no `xc * xc`).
# Writing fresh memory is dear (a kept `x_hat` took a quarter of the forward) and the graph keeps
# `x` anyway: keep each row's `mean` and `rstd` only and centre again in the backward, with
# `Σ dy · x_hat = rstdᵀ (dy · xc)`, `mean(g) = (dy @ gamma) / C` and `x_hat · mean(g · x_hat) =
# xc · rstd² · ((dy · xc) @ gamma) / C`. The given `BlockedLayerNorm` runs a block of rows (about
# `BLOCK` values) at a time; you write one block, into the given arrays: `_layernorm_rows(x, gamma, beta, eps,
# out, mean, rstd)` fills `out`, `mean` and `rstd` `(rows, 1)`; `_layernorm_grads(grad, x, mean,
# rstd, gamma, gx, ggamma, gbeta)` fills `gx` and adds the block's sums into `ggamma` and `gbeta`
# (each None when nobody needs it).


# %% nbgrader={"grade": false, "grade_id": "layernorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _layernorm_rows(x, gamma, beta, eps, out, mean, rstd) -> None:
    """One block of rows (rows, C): out = gamma * x_hat + beta, keeping each row's mean and rstd."""
    ### BEGIN SOLUTION
    np.copyto(mean, mean_last(x))
    np.subtract(x, mean, out=out)  # xc, in out's buffer
    var = np.einsum("...c,...c->...", out, out)[..., None] / x.shape[-1]  # (rows, 1)
    np.reciprocal(np.sqrt(var + eps, out=rstd), out=rstd)  # 1 / sqrt(var + eps)
    out *= rstd  # x_hat
    out *= gamma
    out += beta
    ### END SOLUTION


def _layernorm_grads(grad, x, mean, rstd, gamma, gx, ggamma, gbeta) -> None:
    """One block of rows: gx (None: not needed), and its sums added into ggamma and gbeta."""
    ### BEGIN SOLUTION
    xc = x - mean  # centred again; x_hat = xc * rstd is never formed
    dy_xc = grad * xc  # dgamma's terms (weighted by rstd) and, through gamma, mean(g * x_hat)
    if ggamma is not None:
        ggamma += rstd[:, 0] @ dy_xc  # Σ dy * x_hat
    if gbeta is not None:
        gbeta += sum_leading(grad)
    if gx is not None:
        mean_g = (grad @ gamma)[..., None] / x.shape[-1]  # mean(g), g = grad * gamma
        rate = (dy_xc @ gamma)[..., None] * (rstd * rstd / x.shape[-1])  # mean(g x_hat) rstd
        np.multiply(grad, gamma, out=gx)  # g, the gradient with respect to x_hat
        gx -= mean_g
        gx -= np.multiply(xc, rate, out=xc)  # x_hat * mean(g * x_hat); xc's buffer, used up
        gx *= rstd
    ### END SOLUTION


class FusedLayerNorm(BlockedLayerNorm):
    """Layer norm over the last axis, one node: the given block loop with your kernels."""

    block_rows, block_grads = staticmethod(_layernorm_rows), staticmethod(_layernorm_grads)


# %% [markdown]
# ## 5. GELU in cache-sized blocks, kept or recomputed
#
# GELU (tanh approximation) is `½ x (1 + t)` with `t = tanh(u)`, `u = s (x + c x³)`. Module 02
# makes a new `(B, T, 4C)` array per operator; steps in place (`np.multiply(x, x, out=t)`, ...)
# save those, but each is still a pass over more MiB than the core's cache holds. So the given
# `BlockedGELU` runs all the steps on one block of `BLOCK` values while it is in cache.
#
# `_gelu_tanh(x, t)` writes `t` for one block; the given forward writes `½ x (1 + t)` and keeps
# `x` and `t` (with `recompute=True` only `x`; the backward recomputes `t` block by block).
# `_gelu_slope(x, t, grad, out, spare)` writes one block's gradient. With
# `q = ½ x u' = x (½ s + 3/2 s c x²)`:
#
#     dGELU/dx = ½ (1 + t) + ½ x (1 − t²) u' = (1 + t) (½ + q (1 − t))
#
# so `out = q`, `out *= 1 − t`, `out += ½`, `out *= 1 + t`, `out *= grad`, with `spare` as
# scratch. Python floats keep float32 arrays float32, so the constants stay plain numbers.


# %% nbgrader={"grade": false, "grade_id": "gelu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _gelu_tanh(x: np.ndarray, t: np.ndarray) -> None:
    """t = tanh(s (x + c x³)), written into t."""
    ### BEGIN SOLUTION
    np.multiply(x, x, out=t)
    t *= GELU_SCALE * GELU_CUBIC
    t += GELU_SCALE
    t *= x
    np.tanh(t, out=t)
    ### END SOLUTION


def _gelu_slope(x, t, grad, out, spare) -> None:
    """out = grad * dGELU/dx, from x and t = tanh(u); `spare` is scratch of the same size."""
    ### BEGIN SOLUTION
    np.multiply(x, x, out=out)  # q = x (½ s + 3/2 s c x²) = ½ x u'
    out *= 1.5 * GELU_SCALE * GELU_CUBIC
    out += 0.5 * GELU_SCALE
    out *= x
    np.subtract(1, t, out=spare)
    out *= spare  # q (1 − t)
    out += 0.5
    np.add(t, 1, out=spare)
    out *= spare  # (1 + t) (½ + q (1 − t))
    out *= grad
    ### END SOLUTION


class FusedGELU(BlockedGELU):
    """GELU, tanh approximation, one node: the given block loop with your kernels."""

    block_tanh, block_slope = staticmethod(_gelu_tanh), staticmethod(_gelu_slope)


# %% [markdown]
# ## 6. Embedding gradients by sorting
#
# Module 11's backward adds every gradient row into the row of its token id with `np.add.at`,
# element by element. Sorting the ids (stably) puts the rows of each id next to each other; each
# run of equal ids starts where the sorted id changes, and `np.add.reduceat(rows[order], starts)`
# sums every run in one vectorised call. The forward is module 11's `weight[ids]`.


# %% nbgrader={"grade": false, "grade_id": "embedding", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class SortedEmbeddingLookup(Function):
    """Module 11's lookup `weight[ids]`; the backward sums each id's rows after sorting the ids."""

    def forward(self, weight, ids):
        self.ids, self.num_rows = ids, weight.shape[0]
        return weight[ids]  # (*ids.shape, D)

    def backward(self, grad):
        out = np.zeros((self.num_rows, grad.shape[-1]), dtype=grad.dtype)
        flat_ids = self.ids.reshape(-1)
        if flat_ids.size == 0:
            return (out,)
        ### BEGIN SOLUTION
        rows = grad.reshape(flat_ids.size, -1)  # (N, D): one row per looked-up id
        order = np.argsort(flat_ids, kind="stable")
        sorted_ids = flat_ids[order]
        starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])  # runs begin
        out[sorted_ids[starts]] = np.add.reduceat(rows[order], starts, axis=0)
        ### END SOLUTION
        return (out,)


# %% [markdown]
# ## 7. AdamW without temporaries
#
# Module 06's update, `m̂ = m / (1 − β1ᵗ)` and `v̂ = v / (1 − β2ᵗ)`:
#
#     m = β1 m + (1 − β1) g     v = β2 v + (1 − β2) g²     p −= lr · m̂ / (sqrt(v̂) + eps)
#
# as written, makes a dozen parameter-sized temporaries per parameter per step.
# `_fused_update(p, state, g)` updates the moments in place and builds the step in one scratch
# buffer shared by every parameter (`self._buffer(p)`, given); the bias corrections are numbers,
# folded into the step size and the denominator. The state keeps module 06's names (`step`,
# `exp_avg`, `exp_avg_sq`, made on the first update), so checkpoints move between the two. The
# given `step` applies weight decay (AdamW shrinks `p`, Adam adds `wd · p` to `g`), then yours.

# %%
#| export accel.optim
"""AdamW's update without temporaries (module 18): in-place moments, one scratch buffer."""

import math

import numpy as np


# %% nbgrader={"grade": false, "grade_id": "adamw", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export accel.optim
class FusedAdam:
    """Module 06's Adam update in place; `accelerate(optimizer)` mixes it into Adam and AdamW."""

    def _buffer(self, p) -> np.ndarray:
        """A buffer shaped like `p`, shared by every parameter, so a step allocates nothing."""
        buf = getattr(self, "_fused_buffer", None)
        if buf is None or buf.size < p.data.size or buf.dtype != p.data.dtype:
            buf = self._fused_buffer = np.empty(p.data.size, dtype=p.data.dtype)
        return buf[: p.data.size].reshape(p.shape)

    def _fused_update(self, p, state: dict, g: np.ndarray) -> None:
        """Update the moments with `g` and move `p` by the bias-corrected step, in place."""
        if "exp_avg" not in state:  # the first update: module 06's names, zero moments
            zeros = np.zeros_like
            state.update(step=0, exp_avg=zeros(p.data), exp_avg_sq=zeros(p.data))
        t = state["step"] = state["step"] + 1
        m, v = state["exp_avg"], state["exp_avg_sq"]
        tmp = self._buffer(p)
        ### BEGIN SOLUTION
        m *= self.beta1
        np.multiply(g, 1.0 - self.beta1, out=tmp)
        m += tmp
        v *= self.beta2
        np.multiply(g, g, out=tmp)
        tmp *= 1.0 - self.beta2
        v += tmp
        step_size = self.lr / (1.0 - self.beta1**t)
        np.sqrt(v, out=tmp)
        tmp /= math.sqrt(1.0 - self.beta2**t)
        tmp += self.eps
        np.divide(m, tmp, out=tmp)
        tmp *= step_size
        p.data -= tmp
        ### END SOLUTION


# %% [markdown]
# ## 8. Using the kernels, and what each buys (given)
#
# `accelerate(model)` (`tinytorch/accel/accelerate.py`) gives each attention, LayerNorm, GELU and
# embedding layer a subclass whose `forward` calls your kernels (what a fast path does not cover,
# a boolean mask or a wrong shape, goes to the lesson's `forward`); `plain(model)` undoes it,
# `accelerated(model)` names the fast parts and `accelerate(optimizer)` mixes in your `FusedAdam`.
# An accelerated GPT splits its batches over the cores (on Linux a forked process that shares the
# weights); `DataParallel(model, workers=2)` splits one over threads. Export (`tito module export
# 18`) after a change. `step_ms(parts, workers=1, recompute=False)` trains a fresh small GPT with
# `parts` accelerated and returns the fastest of four steps after a warm-up: the lesson way, then
# one fast piece after another, then recomputation, then two threads (noisy on a busy machine).

# %% tags=["demo"]
from tinytorch.accel.accelerate import PARTS, step_ms

rows = [("plain", ())] + [(f"+ {part}", PARTS[: i + 1]) for i, part in enumerate(PARTS)]
measured = [(name, step_ms(parts)) for name, parts in rows]
measured += [("all, recompute", step_ms(PARTS, recompute=True)),
             ("all, 2 threads", step_ms(PARTS, workers=2))]  # fmt: skip
for name, ms in measured:
    print(f"{name:<16}{ms:>8.2f} ms{measured[0][1] / ms:>7.2f}x")

# %% [markdown]
# ## Tests
#
# Each graded cell runs your kernel and the lesson's code on the same inputs and compares.


# %%
from tinytorch.accel.accelerate import PARTS, accelerate, accelerated, plain
from tinytorch.checks import graded
from tinytorch.core.activations import gelu
from tinytorch.core.attention import causal_mask, scaled_dot_product_attention
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam, AdamW
from tinytorch.core.tensor import Tensor, precision
from tinytorch.models.transformer import GPT
from tinytorch.nn.normalization import LayerNorm


# %% nbgrader={"grade": true, "grade_id": "test-softmax", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="softmax")
def test_softmax_in_place(rng):
    scores = rng.normal(size=(2, 3, 5)) + causal_mask(3, past_len=2)
    scores[1, 2] = -np.inf  # a row whose keys are all blocked
    blocked = np.isneginf(scores).all(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(blocked, 0, scores.max(axis=-1, keepdims=True)))
    expect = e / np.where(blocked, 1, e.sum(axis=-1, keepdims=True))
    buffer = scores.copy()
    got = softmax_rows_(buffer)
    assert got is buffer, "softmax_rows_ must write into its input and return it"
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-7)
    return {"weights": got}


# %% nbgrader={"grade": true, "grade_id": "test-attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="attention")
def test_fused_attention_equals_the_lesson(rng):
    arrays = [rng.normal(size=(2, 2, 4, 3)) for _ in range(3)]
    weight = rng.normal(size=(2, 2, 4, 3))
    with precision(np.float64):
        lesson = [Tensor(a, requires_grad=True) for a in arrays]
        want, _ = scaled_dot_product_attention(*lesson, mask=causal_mask(4))  # module 12
        (want * Tensor(weight)).sum().backward()
        result = {}
        for label, recompute in (("kept", False), ("recomputed", True)):
            fast = [Tensor(a, requires_grad=True) for a in arrays]
            out = FusedAttention.apply(*fast, mask=causal_mask(4), recompute=recompute)
            (out * Tensor(weight)).sum().backward()
            np.testing.assert_allclose(out.data, want.data, rtol=1e-10, atol=1e-12)
            result[f"{label}_out"] = out.data
            for name, t, lesson_t in zip("qkv", fast, lesson):
                np.testing.assert_allclose(t.grad, lesson_t.grad, rtol=1e-8, atol=1e-10)
                result[f"{label}_d{name}"] = t.grad
        packed = Tensor(np.stack(arrays), requires_grad=True)  # section 3's (3, ...) heads
        out = FusedAttention.apply(packed, mask=causal_mask(4))
        (out * Tensor(weight)).sum().backward()
        np.testing.assert_allclose(out.data, want.data, rtol=1e-10, atol=1e-12)
        want_grad = np.stack([t.grad for t in lesson])
        np.testing.assert_allclose(packed.grad, want_grad, rtol=1e-8, atol=1e-10)
        result["packed_dqkv"] = packed.grad
    return result


# %% nbgrader={"grade": true, "grade_id": "test-projection", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="projection")
def test_packed_projection_equals_three_products(rng):
    x = Tensor(rng.normal(size=(2, 3, 4)), requires_grad=True)
    weights = [Tensor(rng.normal(size=(4, 4)), requires_grad=True) for _ in range(3)]
    biases = [Tensor(rng.normal(size=4), requires_grad=True) for _ in range(3)]
    heads = QKVProjection.apply(x, *weights, *biases, num_heads=2, has_bias=True)
    assert heads.shape == (3, 2, 2, 3, 2), "(n, B, H, T, D)"
    grad = rng.normal(size=heads.shape)
    (heads * Tensor(grad)).sum().backward()
    lesson_x = Tensor(x.data, requires_grad=True)
    for i, (w, b) in enumerate(zip(weights, biases)):  # the lesson: x W + b, split into heads
        lesson_w, lesson_b = Tensor(w.data, requires_grad=True), Tensor(b.data, requires_grad=True)
        y = (lesson_x @ lesson_w + lesson_b).reshape(2, 3, 2, 2).permute(0, 2, 1, 3)
        np.testing.assert_allclose(heads.data[i], y.data, rtol=1e-5, atol=1e-6)
        (y * Tensor(grad[i])).sum().backward()
        np.testing.assert_allclose(w.grad, lesson_w.grad, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b.grad, lesson_b.grad, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad, lesson_x.grad, rtol=1e-5, atol=1e-5)
    grads = {f"dw{i}": w.grad for i, w in enumerate(weights)}
    return {"heads": heads.data, "dx": x.grad, **grads, "db0": biases[0].grad}


# %% nbgrader={"grade": true, "grade_id": "test-layernorm-gelu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-6, grades=("layernorm", "gelu"))
def test_layernorm_and_gelu_equal_the_lessons(rng):
    x = rng.normal(2.0, 3.0, size=(2, 3, 8))
    grad = rng.normal(size=x.shape)
    ln = LayerNorm(8)
    ln.gamma.data[:], ln.beta.data[:] = rng.normal(size=8), rng.normal(size=8)
    runs = {}
    for label in ("lesson", "fast"):
        xt = Tensor(x, requires_grad=True)
        ln.gamma.grad = ln.beta.grad = None
        if label == "lesson":  # modules 13 and 02
            y = gelu(ln(xt))
        else:
            y = FusedGELU.apply(FusedLayerNorm.apply(xt, ln.gamma, ln.beta), recompute=True)
        (y * Tensor(grad)).sum().backward()
        runs[label] = {"y": y.data, "dx": xt.grad, "dgamma": ln.gamma.grad, "dbeta": ln.beta.grad}
    for name, value in runs["lesson"].items():
        np.testing.assert_allclose(runs["fast"][name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    return runs["fast"]


# %% nbgrader={"grade": true, "grade_id": "test-adamw", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="adamw")
def test_fused_adam_equals_the_lesson(rng):
    start, grads = rng.normal(size=(3, 4)), rng.normal(size=(3, 3, 4))
    result = {}
    for cls in (AdamW, Adam):
        fast_p = Tensor(start.copy(), requires_grad=True)
        lesson_p = Tensor(start.copy(), requires_grad=True)
        fast = accelerate(cls([fast_p], lr=0.1, weight_decay=0.1))
        lesson = cls([lesson_p], lr=0.1, weight_decay=0.1)  # module 06
        assert isinstance(fast, cls) and accelerated(fast) == {"adamw"}
        for g in grads:
            fast_p.grad, lesson_p.grad = g.copy(), g.copy()
            fast.step()
            lesson.step()
        np.testing.assert_allclose(fast_p.data, lesson_p.data, rtol=1e-5, atol=1e-6)
        result[cls.__name__] = fast_p.data
    return result


# %% nbgrader={"grade": true, "grade_id": "test-accelerate", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-6, grades="embedding")
def test_accelerate_keeps_the_model_and_its_numbers(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    model = GPT(vocab_size=11, embed_dim=8, num_layers=2, num_heads=2, max_seq_len=6)
    tokens = rng.integers(0, 11, (2, 6))
    runs = {}
    for label in ("lesson", "fast"):
        if label == "fast":
            accelerate(model)
            assert type(model) is GPT and accelerated(model) == set(PARTS) - {"adamw"}
        model.zero_grad()
        logits = model(tokens)
        cross_entropy(logits, tokens).backward()
        grads = {name.replace(".", "_"): p.grad for name, p in model.named_parameters()}
        runs[label] = {"logits": logits.data, **grads}
    for name, value in runs["lesson"].items():
        np.testing.assert_allclose(runs["fast"][name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    assert accelerated(plain(model)) == set()
    return runs["fast"]
