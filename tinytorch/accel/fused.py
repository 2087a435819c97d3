"""The block loops around module 18's kernels: attention, LayerNorm and GELU as one node each.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson. Module 18's students write
the kernels that do one block's arithmetic; its `FusedAttention`, `FusedLayerNorm` and
`FusedGELU` are these classes with those kernels named as class attributes:

- `BlockedAttention`: `block_weights(q, k, mask, scale, out, lse, known)` and
  `block_grads(w, q, k, v, out, grad, scale, dq, dk, dv)`, a block of the batch at a time
  (`head_blocks`), the weights kept or recomputed from each row's log-sum-exp;
- `BlockedLayerNorm`: `block_rows(x, gamma, beta, eps, out, mean, rstd)` and
  `block_grads(grad, x, mean, rstd, gamma, gx, ggamma, gbeta)`, a block of rows at a time;
- `BlockedGELU`: `block_tanh(x, t)` and `block_slope(x, t, grad, out, spare)`, a block of values
  at a time, tanh kept or recomputed.

A class attribute is looked up when the node runs, so a lesson cell run again in a notebook
binds its new kernels with its class.
"""

from __future__ import annotations

import numpy as np

from tinytorch.accel.blocking import (
    batch_part,
    block_scratch,
    blocks,
    head_blocks,
    heads_buffer,
    row_blocks,
)
from tinytorch.core.tensor import Function


class BlockedAttention(Function):
    """softmax(q kᵀ / sqrt(d) + mask) v as one node; inputs q, k, v or one packed (3, ...)."""

    block_weights = block_grads = None  # the lesson's kernels (module 18, section 2)

    def forward(self, *qkv, mask=None, on_weights=None, recompute=False):
        self.packed = len(qkv) == 1
        q, k, v = qkv[0] if self.packed else qkv
        self.scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]))
        self.lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        self.shape = (*self.lead, q.shape[-2], k.shape[-2])  # the scores (..., Tq, Tk)
        kept = None if recompute and on_weights is None else np.empty(self.shape, q.dtype)
        self.lse = np.empty((*self.shape[:-1], 1), q.dtype) if recompute else None
        out = heads_buffer((*self.shape[:-1], v.shape[-1]), v.dtype)  # (..., Tq, Dv)
        n = len(self.shape)
        for part in head_blocks(self.shape):
            arrays = (q, k, v, mask, kept, self.lse)
            qp, kp, vp, mp, wp, lp = (batch_part(a, part, n) for a in arrays)
            w = self.block_weights(qp, kp, mp, self.scale, wp, lp)
            np.matmul(w, vp, out=out[part])
        if on_weights is not None:
            on_weights(kept)
        self.q, self.k, self.v, self.out, self.mask = q, k, v, out, mask
        self.weights = None if recompute else kept
        return out

    def backward(self, grad):
        q, k, v, n = self.q, self.k, self.v, len(self.shape)
        if self.packed:  # one packed gradient, its three parts written in place
            packed = heads_buffer((*self.lead, *q.shape[-2:]), q.dtype, count=3)
            grads = list(packed) if self.needs_grad[0] else [None] * 3
        else:  # in the broadcast shape; the engine sums broadcast axes away
            grads = [heads_buffer((*self.lead, *a.shape[-2:]), a.dtype) if need else None
                     for a, need in zip((q, k, v), self.needs_grad)]  # fmt: skip
        for part in head_blocks(self.shape):
            qp, kp, vp = (batch_part(a, part, n) for a in (q, k, v))
            if self.weights is None:  # recomputed, this block only
                mp, lp = batch_part(self.mask, part, n), self.lse[part]
                w = self.block_weights(qp, kp, mp, self.scale, lse=lp, known=True)
            else:
                w = self.weights[part]
            dq, dk, dv = (None if d is None else d[part] for d in grads)
            self.block_grads(w, qp, kp, vp, self.out[part], grad[part], self.scale, dq, dk, dv)
        if self.packed:
            return (packed if self.needs_grad[0] else None,)
        return tuple(grads)


class BlockedLayerNorm(Function):
    """Layer norm over the last axis, one node: y = gamma * (x - mean) / sqrt(var + eps) + beta."""

    block_rows = block_grads = None  # the lesson's kernels (module 18, section 4)

    def forward(self, x, gamma, beta, eps=1e-5):
        rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])  # (rows, C)
        out, self.rows, self.gamma, self.shape = np.empty_like(rows), rows, gamma, x.shape
        self.mean, self.rstd = (np.empty((len(rows), 1), rows.dtype) for _ in range(2))
        for part in row_blocks(*rows.shape):
            self.block_rows(rows[part], gamma, beta, eps, out[part], self.mean[part],
                            self.rstd[part])  # fmt: skip
        return out.reshape(x.shape)

    def backward(self, grad):
        rows = self.rows
        grad = np.ascontiguousarray(grad).reshape(rows.shape)
        gx = np.empty_like(rows) if self.needs_grad[0] else None
        ggamma, gbeta = (np.zeros(rows.shape[1], rows.dtype) if need else None
                         for need in self.needs_grad[1:3])  # fmt: skip
        for part in row_blocks(*rows.shape):
            self.block_grads(grad[part], rows[part], self.mean[part], self.rstd[part], self.gamma,
                             None if gx is None else gx[part], ggamma, gbeta)  # fmt: skip
        return None if gx is None else gx.reshape(self.shape), ggamma, gbeta


class BlockedGELU(Function):
    """GELU, tanh approximation, block by block; `recompute` keeps only x."""

    block_tanh = block_slope = None  # the lesson's kernels (module 18, section 5)

    def forward(self, x, recompute=False):
        x = np.ascontiguousarray(x)  # flat views below need one memory order
        flat, out = x.reshape(-1), np.empty(x.size, x.dtype)
        t = None if recompute else np.empty_like(flat)
        scratch = block_scratch(x.size, x.dtype)
        for part in blocks(x.size):
            xs, os = flat[part], out[part]
            ts = scratch[: xs.size] if recompute else t[part]
            self.block_tanh(xs, ts)
            np.multiply(ts, 0.5, out=os)  # ½ x (1 + t)
            os += 0.5
            os *= xs
        self.x, self.t = x, None if recompute else t.reshape(x.shape)
        return out.reshape(x.shape)

    def backward(self, grad):
        flat, grad = self.x.reshape(-1), np.ascontiguousarray(grad).reshape(-1)
        kept = None if self.t is None else self.t.reshape(-1)
        slope = np.empty_like(flat)
        spare, scratch = (block_scratch(flat.size, flat.dtype) for _ in range(2))
        for part in blocks(flat.size):
            xs = flat[part]
            if kept is None:  # recomputed: t of this block only, while x is in cache
                ts = scratch[: xs.size]
                self.block_tanh(xs, ts)
            else:
                ts = kept[part]
            self.block_slope(xs, ts, grad[part], slope[part], spare[: xs.size])
        return (slope.reshape(self.x.shape),)
