"""Cached generation for an accelerated Llama: module 21's steps, one numpy pass a token.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson. What
`tinytorch/accel/decode.py` does for module 13's GPT, for module 21's Llama: `accelerate(llama)`
gives the model a `fast_generation` (`WholeTokenDecoder`), and module 21's `Llama.generate` with
the cache runs it while `runs(model)` holds. On arrays prepared once a call:

- each block's q, k and v weights side by side (one product; q's columns scaled by
  1/sqrt(head_dim), which the rotary turn keeps) while that copy is small (`FUSE_BYTES`), and
  SwiGLU's w1 and w3 likewise; the kv heads in caches preallocated to the positions the call can
  reach, the keys stored transposed for the scores' product;
- q and k turned by the rotary angles of their positions (`rotate_pairs_`, module 21's pairs);
  the G query heads of a kv head stacked along the rows, as the lesson groups them;
- RMSNorm on rows (the mean square as a product with a column of 1/C), SwiGLU's gate in
  `SwiGLUGate`'s order, the logits of each row's last position only;
- the prompt's positions at once with module 12's causal mask, then one position a step, and
  once the context is longer than `max_seq_len` the window's positions again every step, as
  `Llama._next_logits` does; `sampling_loop` for the sampling.

It runs only when every layer it replaces takes the fast path of `accelerate` (module 21's
parts and the embedding) on the lessons' own classes and no listener watches; otherwise the
lesson's `generate` runs. The logits equal the lesson's to float32 rounding (its tests compare
them step by step).
"""

from __future__ import annotations

import numpy as np

from tinytorch.accel import decode
from tinytorch.accel.accelerate import FastEmbedding, _lesson_class
from tinytorch.accel.decode import FUSE_BYTES, _fast
from tinytorch.accel.llama import (
    FastGroupedQueryAttention,
    FastRMSNorm,
    FastSwiGLU,
    rotate_pairs_,
    tables,
)
from tinytorch.core.hooks import listeners
from tinytorch.core.layers import Linear
from tinytorch.models.llama import Llama, LlamaBlock


def fits(model) -> bool:
    """Every layer the whole-token path replaces takes accelerate's fast path, on the lessons'
    own classes, and no listener watches the layers' calls."""
    if type(model) is not Llama or listeners():
        return False
    head = model.lm_head
    if not _fast(model.token_embedding, FastEmbedding) or not _fast(model.norm, FastRMSNorm):
        return False
    if head is not None and (_lesson_class(head) is not Linear or head.bias is not None):
        return False
    for block in model.blocks:
        att, ffn = block.attention, block.feed_forward
        linears = (att.q_proj, att.k_proj, att.v_proj, att.out_proj, ffn.w1, ffn.w2, ffn.w3)
        if not (
            type(block) is LlamaBlock
            and _fast(att, FastGroupedQueryAttention)
            and _fast(block.attention_norm, FastRMSNorm)
            and _fast(block.ffn_norm, FastRMSNorm)
            and _fast(ffn, FastSwiGLU)
            and all(_lesson_class(x) is Linear and x.bias is None for x in linears)
        ):
            return False
    return True


def _side_by_side(weights: list, scale: float = 1.0) -> list:
    """The weights as one product's (the first one's columns scaled) while the copy is small,
    else apart; the model's own weights stay as they are."""
    if sum(w.nbytes for w in weights) > FUSE_BYTES:
        return [w * w.dtype.type(scale) if i == 0 and scale != 1 else w
                for i, w in enumerate(weights)]  # fmt: skip
    fused = np.concatenate(weights, axis=1)
    fused[:, : weights[0].shape[1]] *= scale
    return [fused]


def _products(rows: np.ndarray, weights: list, sizes: list) -> list:
    """rows @ each weight, as `sizes` columns apiece, whether the weights are side by side."""
    if len(weights) == len(sizes):
        return [rows @ w for w in weights]
    return np.split(rows @ weights[0], np.cumsum(sizes)[:-1], axis=-1)


class _Norm:
    """One RMSNorm's arrays: its weight, eps and a column of 1/C for the rows' mean squares."""

    def __init__(self, norm, dtype):
        self.weight, self.eps = norm.weight.data, norm.eps
        self.mean = np.full((norm.dim, 1), 1 / norm.dim, dtype)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """(N, C) -> a new (N, C) array: each row over its root mean square, times the weight."""
        inv = (rows * rows) @ self.mean  # (N, 1)
        inv += self.eps
        np.sqrt(inv, out=inv)
        np.reciprocal(inv, out=inv)
        out = rows * inv
        out *= self.weight
        return out


class _Block:
    """One LlamaBlock prepared for a generation: its weights as products want them and its kv
    heads for `length` positions (keys (B, H_kv, D, length), values (B, H_kv, length, D))."""

    def __init__(self, block, batch: int, length: int, dtype):
        att, ffn = block.attention, block.feed_forward
        self.heads, self.dim = att.num_heads, att.head_dim
        self.cos, self.sin = tables(att.rotary, 0, length, dtype)  # every position's, cast once
        self.kv_heads = att.num_kv_heads
        self.sizes = [att.embed_dim, self.kv_heads * self.dim, self.kv_heads * self.dim]
        scale = float(1 / np.sqrt(att.head_dim))
        self.qkv = _side_by_side([p.weight.data for p in (att.q_proj, att.k_proj, att.v_proj)],
                                 scale)  # fmt: skip
        self.out = att.out_proj.weight.data
        self.hidden = ffn.w1.weight.shape[1]
        self.gate_up = _side_by_side([ffn.w1.weight.data, ffn.w3.weight.data])
        self.down = ffn.w2.weight.data
        self.norm1, self.norm2 = _Norm(block.attention_norm, dtype), _Norm(block.ffn_norm, dtype)
        self.keys = np.empty((batch, self.kv_heads, self.dim, length), dtype)
        self.values = np.empty((batch, self.kv_heads, length, self.dim), dtype)

    def __call__(self, x: np.ndarray, start: int, mask) -> np.ndarray:
        """(B, T, C) rows at positions start.. -> the block's output, written over x."""
        x += self._attend(self.norm1(x.reshape(-1, x.shape[-1])), x.shape, start, mask)
        x += self._swiglu(self.norm2(x.reshape(-1, x.shape[-1]))).reshape(x.shape)
        return x

    def _heads(self, part: np.ndarray, batch: int, steps: int) -> np.ndarray:
        """(B*T, n*D) -> a contiguous (B, n, T, D)."""
        return np.ascontiguousarray(part.reshape(batch, steps, -1, self.dim).transpose(0, 2, 1, 3))

    def _attend(self, rows: np.ndarray, shape: tuple, start: int, mask) -> np.ndarray:
        batch, steps, embed = shape
        end, groups = start + steps, self.heads // self.kv_heads
        q, k, v = (self._heads(p, batch, steps) for p in _products(rows, self.qkv, self.sizes))
        cos, sin = self.cos[start:end], self.sin[start:end]
        rotate_pairs_(q, cos, sin)  # q already scaled: the turn is linear
        rotate_pairs_(k, cos, sin)
        self.keys[..., start:end] = k.transpose(0, 1, 3, 2)  # (B, H_kv, D, T)
        self.values[:, :, start:end] = v
        stacked = q.reshape(batch, self.kv_heads, groups * steps, self.dim)  # head h: group h//G
        scores = stacked @ self.keys[..., :end]  # (B, H_kv, G*T, end)
        if mask is not None:
            scores.reshape(batch, self.kv_heads, groups, steps, end)[...] += mask
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        heads_out = (scores @ self.values[:, :, :end]).reshape(batch, self.heads, steps, self.dim)
        merged = heads_out.transpose(0, 2, 1, 3).reshape(batch * steps, embed)  # (B*T, C)
        return (merged @ self.out).reshape(shape)

    def _swiglu(self, rows: np.ndarray) -> np.ndarray:
        a, b = _products(rows, self.gate_up, [self.hidden, self.hidden])
        half = a.dtype.type(0.5)
        s = a * half  # sigmoid(a) = (1 + tanh(a / 2)) / 2, as SwiGLUGate writes it
        np.tanh(s, out=s)
        s *= half
        s += half
        gate = a * s
        gate *= b
        return gate @ self.down


class _Generation(decode._Generation):
    """The prepared arrays of one generation and how many positions are cached; its
    `next_logits` is the GPT's (`Llama._next_logits`'s steps), its tokens carry no positions."""

    def __init__(self, model: Llama, batch: int, length: int):
        weight = model.token_embedding.weight.data
        self.model, self.embedding, self.cached = model, weight, 0
        self.blocks = [_Block(block, batch, length, weight.dtype) for block in model.blocks]
        self.norm = _Norm(model.norm, weight.dtype)
        self.head = (weight.T if model.lm_head is None else model.lm_head.weight.data, None)

    def _embed(self, new: np.ndarray, start: int) -> np.ndarray:
        return self.embedding[new]  # a copy: the rotary turn gives the positions


class WholeTokenDecoder:
    """What `accelerate` gives a Llama as `fast_generation`; module 21's `generate` asks
    `runs(model)` first and runs its own steps when it is False."""

    def runs(self, model) -> bool:
        """Whether `model.generate` with the cache takes the whole-token path now."""
        return fits(model)

    def cached_generate(self, model, prompt_tokens, max_new_tokens=50, temperature=1.0,
                        top_k=None, seed=None, stop_token=None, top_p=None,
                        repetition_penalty=1.0) -> np.ndarray:  # fmt: skip
        """`Llama.generate(..., use_cache=True)`'s tokens, with the same arguments."""
        if not fits(model):
            raise ValueError("this Llama's layers are not all accelerated: use model.generate")
        return decode.whole_tokens(model, _Generation, prompt_tokens, max_new_tokens,
                                   temperature, top_k, seed, stop_token, top_p,
                                   repetition_penalty)  # fmt: skip


__all__ = ["WholeTokenDecoder", "fits"]
