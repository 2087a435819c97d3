"""Cached generation for an accelerated GPT: module 17's steps, one numpy pass a token.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson. Module 17's
`cached_generate` calls the model's layers for every new token: about fifty layer calls and
Function nodes a token, each a few microseconds of Python around a one-row array, which for a
small model cost more than the arithmetic. `accelerate(gpt)` gives the model a
`fast_generation` (`WholeTokenDecoder`) that module 13's `GPT.generate` asks for
(`tinytorch.models.decoding._cached_generation`), and that runs the same steps on arrays
prepared once a call:

- each block's q, k and v weights side by side (one product; q's columns already scaled by
  1/sqrt(head_dim)) while that copy is small (`FUSE_BYTES`), the keys and values in caches
  preallocated to the positions the call can reach (module 17's cache, its keys stored
  transposed for the scores' product);
- the prompt's positions at once, then one position a step, and once the context is longer
  than `max_seq_len` the window's positions again every step, as module 17 does;
- LayerNorm on rows (the mean and variance as products with a column of 1/C), GELU through
  module 18's `_gelu_tanh` in FusedGELU's order, the logits of each row's last position only;
- `sampling_loop`, so temperature, top-k, top-p, the repetition penalty, a seed and a stop
  token behave exactly as everywhere else.

It runs only when every layer it replaces takes module 18's fast path (the parts "attention",
"layernorm", "gelu" and "embedding", on the lessons' own classes) and no listener (module 14's
profiler, `tito diagnose`) watches; otherwise module 17's `cached_generate` runs. The logits
equal module 17's to float32 rounding (its tests compare them step by step).
"""

from __future__ import annotations

import numpy as np

from tinytorch.accel.accelerate import (
    FastAttention,
    FastBlock,
    FastEmbedding,
    FastGELU,
    FastLayerNorm,
    FastMLP,
    _lesson_class,
)
from tinytorch.accel.kernels import _gelu_tanh
from tinytorch.core.attention import causal_mask
from tinytorch.core.hooks import listeners
from tinytorch.core.layers import Linear
from tinytorch.memo.generation import cached_generate
from tinytorch.models.decoding import _check_generate_args, sampling_loop
from tinytorch.models.transformer import GPT, SinusoidalPositions, sample_next, token_ids_2d

# A block's q, k and v weights side by side make one product instead of three, for a copy of
# them each generation; above this many bytes (GPT-2 small's 7 MiB a block) the three stay.
FUSE_BYTES = 4 << 20


def _fast(obj, fast: type) -> bool:
    """`obj` is a lesson's own layer that accelerate gave the fast path `fast`."""
    return getattr(type(obj), "accelerated_by", None) is fast


def fits(model) -> bool:
    """Every layer the whole-token path replaces takes module 18's fast path, on the lessons'
    own classes, and no listener watches the layers' calls."""
    if type(model) is not GPT or listeners():
        return False
    positions = model.position_embedding
    if not _fast(model.token_embedding, FastEmbedding) or not (
        _fast(positions, FastEmbedding) or type(positions) is SinusoidalPositions
    ):
        return False
    head = model.lm_head
    if not _fast(model.ln_f, FastLayerNorm) or (
        head is not None and _lesson_class(head) is not Linear
    ):
        return False
    for block in model.blocks:
        att, mlp = block.attention, block.mlp
        linears = (att.q_proj, att.k_proj, att.v_proj, att.out_proj, mlp.linear1, mlp.linear2)
        if not (
            _fast(block, FastBlock)
            and _fast(att, FastAttention)
            and _fast(block.ln1, FastLayerNorm)
            and _fast(block.ln2, FastLayerNorm)
            and _fast(mlp, FastMLP)
            and _fast(mlp.gelu, FastGELU)
            and all(_lesson_class(linear) is Linear for linear in linears)
        ):
            return False
    return True


def _weight_bias(linear):
    return linear.weight.data, None if linear.bias is None else linear.bias.data


def _fused(projections, scale: float) -> tuple:
    """q, k and v's weights (and biases) side by side, q's scaled: a copy, the model's own
    weights stay as they are."""
    size = projections[0].weight.shape[1]
    weight = np.concatenate([p.weight.data for p in projections], axis=1)
    weight[:, :size] *= scale
    if all(p.bias is None for p in projections):
        return weight, None
    zeros = np.zeros(size, weight.dtype)
    bias = np.concatenate([zeros if p.bias is None else p.bias.data for p in projections])
    bias[:size] *= scale
    return weight, bias


def _affine(rows: np.ndarray, weight: np.ndarray, bias) -> np.ndarray:
    out = rows @ weight
    if bias is not None:
        out += bias
    return out


class _Norm:
    """One LayerNorm's arrays: gamma, beta, eps and a column of 1/C for the rows' means."""

    def __init__(self, norm, dtype):
        self.gamma, self.beta, self.eps = norm.gamma.data, norm.beta.data, norm.eps
        self.mean = np.full((norm.normalized_shape, 1), 1 / norm.normalized_shape, dtype)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """(N, C) -> a new (N, C) array: each row centred, scaled to unit variance, affine."""
        out = rows - rows @ self.mean
        var = (out * out) @ self.mean  # (N, 1)
        var += self.eps
        out /= np.sqrt(var, out=var)
        out *= self.gamma
        out += self.beta
        return out


class _Block:
    """One TransformerBlock prepared for a generation: its weights as products want them and
    its keys and values for `length` positions (keys (B, H, D, length), values (B, H, length,
    D))."""

    def __init__(self, block, batch: int, length: int, dtype):
        att, mlp = block.attention, block.mlp
        self.attention, self.norm_first = att, block.norm_first
        self.heads, self.head_dim = att.num_heads, att.head_dim
        self.scale = float(1 / np.sqrt(att.head_dim))
        projections = (att.q_proj, att.k_proj, att.v_proj)
        if sum(p.weight.data.nbytes for p in projections) <= FUSE_BYTES:
            self.qkv = [_fused(projections, self.scale)]
        else:
            self.qkv = [_weight_bias(p) for p in projections]
        self.out = _weight_bias(att.out_proj)
        self.up, self.down = _weight_bias(mlp.linear1), _weight_bias(mlp.linear2)
        self.norm1, self.norm2 = _Norm(block.ln1, dtype), _Norm(block.ln2, dtype)
        self.keys = np.empty((batch, self.heads, self.head_dim, length), dtype)
        self.values = np.empty((batch, self.heads, length, self.head_dim), dtype)

    def __call__(self, x: np.ndarray, start: int, mask) -> np.ndarray:
        """(B, T, C) rows at positions start.. -> the block's output (B, T, C)."""
        if self.norm_first:
            x += self._attend(self.norm1(x.reshape(-1, x.shape[-1])), x.shape, start, mask)
            x += self._mlp(self.norm2(x.reshape(-1, x.shape[-1]))).reshape(x.shape)
            return x
        x += self._attend(x.reshape(-1, x.shape[-1]), x.shape, start, mask)
        rows = self.norm1(x.reshape(-1, x.shape[-1]))
        rows += self._mlp(rows)
        return self.norm2(rows).reshape(x.shape)

    def _attend(self, rows: np.ndarray, shape: tuple, start: int, mask) -> np.ndarray:
        batch, steps, embed = shape
        heads, end = self.heads, start + steps
        if len(self.qkv) == 1:  # one product, q already scaled
            qkv = _affine(rows, *self.qkv[0]).reshape(batch, steps, 3, heads, -1)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # each (B, T, H, D)
        else:
            q, k, v = (_affine(rows, *wb).reshape(batch, steps, heads, -1) for wb in self.qkv)
            q *= self.scale
        self.keys[..., start:end] = k.transpose(0, 2, 3, 1)  # (B, H, D, T)
        self.values[:, :, start:end] = v.transpose(0, 2, 1, 3)  # (B, H, T, D)
        scores = q.transpose(0, 2, 1, 3) @ self.keys[..., :end]  # (B, H, T, end)
        if mask is not None:
            scores += mask
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        if self.attention.keep_attention:
            self.attention.last_attention = scores  # what module 17 keeps for plotting
        heads_out = scores @ self.values[:, :, :end]  # (B, H, T, D)
        merged = heads_out.transpose(0, 2, 1, 3).reshape(batch * steps, embed)
        return _affine(merged, *self.out).reshape(shape)

    def _mlp(self, rows: np.ndarray) -> np.ndarray:
        hidden = _affine(rows, *self.up)
        gelu = np.empty_like(hidden)
        _gelu_tanh(hidden, gelu)  # t = tanh(...), then ½ x (1 + t) as FusedGELU writes it
        gelu *= 0.5
        gelu += 0.5
        gelu *= hidden
        return _affine(gelu, *self.down)


class _Generation:
    """The prepared arrays of one `cached_generate` call and how many positions are cached."""

    def __init__(self, model: GPT, batch: int, length: int):
        weight = model.token_embedding.weight.data
        dtype = weight.dtype
        self.model, self.embedding, self.cached = model, weight, 0
        every = np.arange(length)[None]
        self.positions = np.asarray(model.position_embedding(every).data[0], dtype)  # (L, C)
        self.blocks = [_Block(block, batch, length, dtype) for block in model.blocks]
        self.norm = _Norm(model.ln_f, dtype)
        if model.lm_head is None:
            self.head = (weight.T, None)  # tied weights
        else:
            self.head = _weight_bias(model.lm_head)

    def _embed(self, new: np.ndarray, start: int) -> np.ndarray:
        return self.embedding[new] + self.positions[start : start + new.shape[1]]

    def next_logits(self, tokens: np.ndarray) -> np.ndarray:
        """Logits (B, V) of the next position, as module 17's `_next_logits` gives them."""
        limit = self.model.max_seq_len
        if self.cached == tokens.shape[1] - 1 and self.cached < limit:
            new, start = tokens[:, -1:], self.cached  # one new position
        else:  # the first step, or the window slid: every position again
            new, start = tokens[:, -limit:], 0
        steps = new.shape[1]
        x = self._embed(new, start)  # (B, T, C), a new array
        mask = None  # one new position sees every cached one
        if steps > 1:  # module 12's mask: each new position up to itself
            mask = causal_mask(steps, past_len=start).astype(x.dtype, copy=False)
        for block in self.blocks:
            x = block(x, start, mask)
        self.cached = start + steps
        return _affine(self.norm(x[:, -1]), *self.head)


class WholeTokenDecoder:
    """What `accelerate` gives a GPT as `fast_generation`: `cached_generate` runs the
    whole-token path when `fits(model)`, else module 17's `cached_generate`."""

    def runs(self, model) -> bool:
        """Whether `model.generate` with the cache takes the whole-token path now."""
        return fits(model)

    def cached_generate(self, model, prompt_tokens, max_new_tokens=50, temperature=1.0,
                        top_k=None, seed=None, stop_token=None, top_p=None,
                        repetition_penalty=1.0) -> np.ndarray:  # fmt: skip
        """Module 17's `cached_generate`, with the same arguments and the same tokens."""
        steer = {"top_p": top_p, "repetition_penalty": repetition_penalty}
        if not fits(model):
            return cached_generate(model, prompt_tokens, max_new_tokens, temperature, top_k,
                                   seed, stop_token, **steer)  # fmt: skip
        return whole_tokens(model, _Generation, prompt_tokens, max_new_tokens, temperature,
                            top_k, seed, stop_token, **steer)  # fmt: skip


def whole_tokens(model, generation: type, prompt_tokens, max_new_tokens, temperature, top_k,
                 seed, stop_token, top_p, repetition_penalty) -> np.ndarray:  # fmt: skip
    """`sampling_loop` over a `generation` (a `_Generation` class) of `model`'s prepared arrays,
    after the checks every `generate` makes."""
    _check_generate_args(max_new_tokens, temperature, top_k, model.vocab_size, stop_token)
    tokens = token_ids_2d(prompt_tokens, model.vocab_size)  # (B, T)
    longest = min(model.max_seq_len, tokens.shape[1] + max_new_tokens)  # cached positions
    run = generation(model, len(tokens), longest)
    return sampling_loop(tokens, run.next_logits, sample_next, max_new_tokens,
                         temperature=temperature, top_k=top_k, seed=seed, stop_token=stop_token,
                         context=model.max_seq_len, top_p=top_p,
                         repetition_penalty=repetition_penalty)  # fmt: skip


__all__ = ["WholeTokenDecoder", "fits"]
