"""Module 18's fast paths for module 21's Llama parts: what `accelerate(llama)` swaps in.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson. `accelerate` (the given
tinytorch/accel/accelerate.py) finds this file when module 21 is in the package and swaps each
layer's class for an `Accelerated` subclass with the forward below (`FAST`), as it does for the
GPT's layers; `plain` undoes it. Each forward sends what it does not cover to the lesson's own
forward (its checks and messages).

- `FusedRMSNorm`: one node that keeps only x (the residual stream, kept by the graph anyway) and
  1 / rms per row; the backward recomputes x / rms, with in-place numpy.
- `RotaryProjection`: module 18's `QKVProjection` of q (or k and v) into heads, with the rotary
  turn applied to q and k in place of the fresh projection (each pair turns as one complex
  product); the backward turns the gradient back (the inverse rotation) and hands it to the
  projection's backward. `FusedRotary` is the same turn alone, for a `RotaryEmbedding` used on
  its own. Any start position (a cache).
- `GroupedAttention`: grouped-query attention through module 18's `FusedAttention` without
  repeating the kv heads: the G query heads of a group are stacked along the rows,
  (B, H_kv, G*T, D), so each kv head meets its group in one batched product.
- `SwiGLUGate`: silu(a) * b as one node (keeps a, b and sigmoid(a)).
"""

import numpy as np

from tinytorch.accel.accelerate import AUTO_VALUES, _float_mask, _tensor
from tinytorch.accel.blocking import mean_last, sum_leading
from tinytorch.accel.kernels import FusedAttention, QKVProjection
from tinytorch.core.tensor import Function, Tensor, is_grad_enabled
from tinytorch.models.llama import GroupedQueryAttention, Llama
from tinytorch.nn.llama import RMSNorm, RotaryEmbedding, SwiGLU

LLAMA_LESSON = 21


class FusedRMSNorm(Function):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis, one node."""

    def forward(self, x, weight, eps=1e-5):
        out = x * x
        inv = mean_last(out)  # (..., 1)
        inv += eps
        np.sqrt(inv, out=inv)
        np.reciprocal(inv, out=inv)
        np.multiply(x, inv, out=out)
        out *= weight
        self.x, self.inv, self.weight = x, inv, weight
        return out

    def backward(self, grad):
        normed = self.x * self.inv  # recomputed: one multiply instead of a kept (..., C) array
        gx = gw = None
        if self.needs_grad[1]:
            gw = sum_leading(grad * normed)
        if self.needs_grad[0]:
            gx = grad * self.weight  # the gradient reaching the normalised values
            inner = mean_last(gx * normed)  # (..., 1)
            normed *= inner
            gx -= normed
            gx *= self.inv
        return gx, gw


COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}


def rotate_pairs_(a: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Turn each pair (a[..., 2k], a[..., 2k+1]) of a C-contiguous (..., T, D) array in place by
    the angles whose cos and sin are (T, D/2); pass -sin to turn back.

    A float pair read as one complex number a[2k] + i a[2k+1] turns by one complex product with
    cos + i sin (as Meta's Llama code does it): a single pass, no temporary of a's size.
    """
    kind = COMPLEX.get(a.dtype)
    if kind is not None and a.flags.c_contiguous:
        turn = np.empty(cos.shape, dtype=kind)
        turn.real, turn.imag = cos, sin
        pairs = a.view(kind)  # (..., T, D/2), the same memory
        pairs *= turn
        return a
    pairs = a.view()
    pairs.shape = (*a.shape[:-1], a.shape[-1] // 2, 2)  # a view, or an error: never a copy
    even, odd = pairs[..., 0], pairs[..., 1]
    even_sin, odd_sin = even * sin, odd * sin
    even *= cos
    even -= odd_sin
    odd *= cos
    odd += even_sin
    return a


def tables(rotary: RotaryEmbedding, start: int, steps: int, dtype) -> tuple:
    """cos and sin (T, D/2) of positions start .. start + steps - 1, in `dtype`."""
    window = slice(start, start + steps)
    return rotary.cos[window].astype(dtype), rotary.sin[window].astype(dtype)


class FusedRotary(Function):
    """Module 21's rotary turn of rows (..., T, D), with the inverse turn as its backward."""

    def forward(self, x, cos, sin):
        self.cos, self.sin = cos, sin
        return rotate_pairs_(np.array(x, order="C"), cos, sin)

    def backward(self, grad):
        return (rotate_pairs_(np.array(grad, order="C"), self.cos, -self.sin),)


class RotaryProjection(QKVProjection):
    """x @ W_i split into heads (module 18's QKVProjection, no biases), the first projection
    (q, or k of k and v) turned by the rotary angles: (B, H, T, D) or (n, B, H, T, D)."""

    def forward(self, x, *weights, num_heads: int, cos, sin):
        out = super().forward(x, *weights, num_heads=num_heads, has_bias=False)  # fresh, ours
        self.cos, self.sin = cos, sin
        rotate_pairs_(out if self.n == 1 else out[0], cos, sin)
        return out

    def backward(self, grad):
        grad = np.array(grad, order="C")
        rotate_pairs_(grad if self.n == 1 else grad[0], self.cos, -self.sin)
        return super().backward(grad)


class GroupedAttention(Function):
    """Grouped-query attention of rotated q (B, H, T, D) and k, v (B, H_kv, T_k, D), given packed
    (2, B, H_kv, T_k, D) or apart, with an additive (T, T_k) mask (causal: the Llama's) or none;
    returns the heads merged, (B, T, H * D).

    Query head h belongs to kv head h // G (G = H / H_kv), as in the lesson. The group's query
    rows are stacked, (B, H_kv, G*T, D), and the (T, T_k) mask repeated G times down the rows,
    so module 18's FusedAttention runs one batched product per kv head and no kv head is copied.
    """

    def forward(self, q, *kv, mask=None, recompute=False):
        self.packed = len(kv) == 1
        k, v = kv[0] if self.packed else kv
        batch, heads, steps, dim = q.shape
        self.kv_heads, self.groups = k.shape[1], heads // k.shape[1]
        rows = q.reshape(batch, self.kv_heads, self.groups * steps, dim)
        if mask is not None:
            mask = np.tile(np.broadcast_to(mask, (steps, k.shape[2])), (self.groups, 1))
        self.inner = FusedAttention()
        need_q, *need_kv = self.needs_grad
        self.inner.needs_grad = (need_q, *(need_kv * 2 if self.packed else need_kv))
        out = self.inner.forward(rows, k, v, mask=mask, recompute=recompute)  # (B, H_kv, G*T, D)
        merged = out.reshape(batch, heads, steps, dim).transpose(0, 2, 1, 3)  # (B, T, H, D)
        return merged.reshape(batch, steps, heads * dim)

    def backward(self, grad):
        batch, steps, _ = grad.shape
        dim = self.inner.q.shape[-1]
        heads = self.kv_heads * self.groups
        g = grad.reshape(batch, steps, heads, dim).transpose(0, 2, 1, 3)  # (B, H, T, D)
        g = np.ascontiguousarray(g).reshape(batch, self.kv_heads, self.groups * steps, dim)
        dq, dk, dv = self.inner.backward(g)
        self.inner = None
        dq = None if dq is None else dq.reshape(batch, heads, steps, dim)
        if not self.packed:
            return dq, dk, dv
        return dq, None if dk is None else np.stack([dk, dv])  # packed: both or neither


class SwiGLUGate(Function):
    """silu(a) * b = a * sigmoid(a) * b elementwise, one node."""

    def forward(self, a, b):
        half = a.dtype.type(0.5)
        s = a * half  # sigmoid(a) = (1 + tanh(a / 2)) / 2: no overflow, fewer passes than exp
        np.tanh(s, out=s)
        s *= half
        s += half
        out = a * s
        out *= b
        self.a, self.b, self.s = a, b, s
        return out

    def backward(self, grad):
        a, b, s = self.a, self.b, self.s
        ga = gb = None
        if self.needs_grad[1]:
            gb = a * s  # silu(a)
            gb *= grad
        if self.needs_grad[0]:
            ga = 1 - s  # silu'(a) = s (1 + a (1 - s))
            ga *= a
            ga += 1
            ga *= s
            ga *= b
            ga *= grad
        return ga, gb


class FastRMSNorm:
    """Module 21's RMSNorm through FusedRMSNorm."""

    def forward(self, x):
        x = _tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.dim:
            return super().forward(x)  # the lesson's error message
        return FusedRMSNorm.apply(x, self.weight, eps=self.eps)


class FastRotary:
    """Module 21's RotaryEmbedding through FusedRotary."""

    def forward(self, x, start: int = 0):
        x = _tensor(x)
        steps = x.shape[-2] if x.ndim >= 2 else 0
        fits = x.ndim >= 2 and x.shape[-1] == self.head_dim
        if not (fits and 0 <= start and start + steps <= self.max_seq_len):
            return super().forward(x, start)  # the lesson's checks
        cos, sin = tables(self, start, steps, x.dtype)
        return FusedRotary.apply(x, cos=cos, sin=sin)


class FastSwiGLU:
    """Module 21's SwiGLU, w2(silu(w1 x) * w3 x), with the gate through SwiGLUGate."""

    def forward(self, x):
        return self.w2(SwiGLUGate.apply(self.w1(x), self.w3(x)))


class FastGroupedQueryAttention:
    """Module 21's GroupedQueryAttention through RotaryProjection and GroupedAttention.

    With a cache, the fast path runs only when autograd does not record (generation); the lesson
    keeps no gradient for the cached keys either, and its forward handles the rest.
    """

    recompute = False

    def forward(self, x, mask=None, start: int = 0, cache=None):
        x = _tensor(x)
        fits = x.ndim == 3 and x.shape[-1] == self.embed_dim and start >= 0
        fits = fits and start + (x.shape[1] if fits else 0) <= self.rotary.max_seq_len
        projections = (self.q_proj, self.k_proj, self.v_proj)
        fits = fits and all(p.bias is None for p in projections)  # the lesson's: no biases
        if not fits or (cache is not None and is_grad_enabled()):
            return super().forward(x, mask, start, cache)
        batch, steps, _ = x.shape
        keys = steps + (len(cache) if cache is not None else 0)
        scores = (batch, self.num_heads, steps, keys)
        ok, mask_values = _float_mask(mask, scores, x.dtype)
        if not ok or (mask_values is not None and mask_values.ndim > 2):
            return super().forward(x, mask, start, cache)
        recompute = self.recompute
        if recompute is None:  # AUTO: recompute the weights when they are large
            recompute = batch * self.num_heads * steps * keys >= AUTO_VALUES
        cos, sin = tables(self.rotary, start, steps, x.dtype)
        heads = self.num_heads
        q = RotaryProjection.apply(x, self.q_proj.weight, num_heads=heads, cos=cos, sin=sin)
        kv = RotaryProjection.apply(x, self.k_proj.weight, self.v_proj.weight,
                                    num_heads=self.num_kv_heads, cos=cos, sin=sin)  # fmt: skip
        if cache is None:
            out = GroupedAttention.apply(q, kv, mask=mask_values, recompute=recompute)
        else:  # generation: every earlier position's kv heads
            k_all, v_all = cache.append(kv.data[0], kv.data[1])
            out = GroupedAttention.apply(q, Tensor(k_all), Tensor(v_all), mask=mask_values)
        return self.out_proj(out)


# part -> (the lesson's class, its fast path); every part is module 21's
FAST = {"rmsnorm": (RMSNorm, FastRMSNorm), "rotary": (RotaryEmbedding, FastRotary),
        "swiglu": (SwiGLU, FastSwiGLU), "gqa": (GroupedQueryAttention, FastGroupedQueryAttention)}  # fmt: skip
LESSONS = {part: LLAMA_LESSON for part in FAST}
MODELS = (Llama,)  # the models whose training batch `accelerate` splits over the cores


__all__ = ["FusedRMSNorm", "rotate_pairs_", "tables", "FusedRotary", "RotaryProjection",
    "GroupedAttention", "SwiGLUGate", "FastRMSNorm", "FastRotary", "FastSwiGLU",
    "FastGroupedQueryAttention", "FAST", "LESSONS", "MODELS"]  # fmt: skip
