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
# # Module 21 — Llama: the parts of today's open models
#
# Module 13's GPT is GPT-2 (2019): LayerNorm, learned positions, a GELU MLP, full multi-head
# attention. Llama (2023), and Mistral, Qwen and Gemma after it, keep the shape of that model
# (embeddings, a stack of pre-norm residual blocks, a final norm, a vocabulary projection) and
# replace four of its parts. Each replacement is small; each has a reason you can measure.
#
# | GPT-2 part | replaced by | why |
# |---|---|---|
# | LayerNorm (mean, variance, shift) | **RMSNorm** (scale only) | same quality, one statistic less |
# | learned position vectors | **rotary positions** (RoPE) | relative positions, no table to learn |
# | GELU MLP, 4x | **SwiGLU**, 8/3 x, three matrices | a gate: lower loss at the same size |
# | H key/value heads | **grouped-query attention** | H / H_kv times smaller KV cache |
#
# You build each part with its backward where it is a new operation, then assemble them into a
# `Llama` that trains with module 06's optimizers and generates with module 17's KV cache. The
# milestone `tito milestone run llama` trains it beside a GPT of the same parameter count.
#
# ```
# tokens (B, T) -> token embedding                              (B, T, C)   no position vectors
#               -> N x [x + attention(rmsnorm(x)), x + swiglu(rmsnorm(x))]
#                   attention: q, k rotated by position; K, V with H_kv heads
#               -> RMSNorm -> lm_head                           (B, T, vocab)
# ```

# %%
#| default_exp models.llama

# %% [markdown]
# The norm, the rotation and the feed-forward are layers of their own, exported to
# `tinytorch/nn/llama.py`; the attention and the model go to `tinytorch/models/llama.py`.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from tinytorch.core.attention import causal_mask, check_heads, scaled_dot_product_attention
from tinytorch.core.autograd import no_grad
from tinytorch.core.embeddings import Embedding
from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import Function, ShapeError, Tensor, is_grad_enabled
from tinytorch.memo.kvcache import KVCache
from tinytorch.models.decoding import _check_generate_args, sampling_loop
from tinytorch.models.llama_weights import ours_from_torch, spelling
from tinytorch.models.transformer import PRESETS, sample_next, token_ids_2d

# isort: split

# %%
#| export nn.llama
import numpy as np

from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import Function, ShapeError, Tensor


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


# %% [markdown]
# ## 1. RMSNorm
#
# LayerNorm subtracts the mean, divides by the standard deviation, then scales and shifts.
# Zhang and Sennrich (2019) found the mean and the shift do almost nothing for a transformer:
# rescaling each position to unit root-mean-square is enough.
#
# $$y = w \odot \frac{x}{\mathrm{rms}(x)}, \qquad \mathrm{rms}(x) = \sqrt{\tfrac1C \textstyle\sum_i x_i^2 + \epsilon}$$
#
# One reduction instead of two, no `beta`. Write it as one `Function` with its backward (as
# module 02's activations are). `forward` gets the inputs' numpy arrays (keywords such as `eps`
# as given) and returns an array; `backward(grad)` returns a tuple with one gradient per array
# input of `forward`, in order, even when there is only one: `(dx, dw)` here, `(dx,)` for SiLU
# and the rotation. A bare array is not a 1-tuple: the engine would pair its first row with the
# input. With `r = 1 / rms(x)` and `n = x r`, the chain rule gives, per position, for the
# upstream gradient `g`:
#
# ```
# dL/dw = g * n                                (the engine sums it over batch and positions)
# dL/dx = r * (g w - n * mean(g w * n))        (the mean over the C features, keepdims)
# ```
#
# The second line comes from `d r / d x_j = -r^3 x_j / C`: every feature's change moves the scale
# of all the others, which is what the subtracted term accounts for.


# %% nbgrader={"grade": false, "grade_id": "rmsnorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.llama
class RMSNormFunction(Function):
    """x / rms(x) * weight over the last axis; rms(x) = sqrt(mean(x^2) + eps)."""

    def forward(self, x, weight, eps=1e-5):
        ### BEGIN SOLUTION
        self.inv_rms = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)  # (..., 1)
        self.normed = x * self.inv_rms  # (..., C)
        self.weight = weight
        return self.normed * weight
        ### END SOLUTION

    def backward(self, grad):
        """The tuple (dx, dweight), each of the output's shape (the engine sums dweight)."""
        ### BEGIN SOLUTION
        gn = grad * self.weight  # the gradient reaching the normalised values
        inner = (gn * self.normed).mean(axis=-1, keepdims=True)  # (..., 1)
        return self.inv_rms * (gn - self.normed * inner), grad * self.normed
        ### END SOLUTION


class RMSNorm(Module):
    """Root-mean-square normalisation over the last axis with a learnable scale `weight`."""

    def __init__(self, dim: int, eps: float = 1e-5):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ValueError(f"RMSNorm: dim must be a positive integer, got {dim!r}")
        if not eps >= 0:  # NaN too
            raise ValueError(
                f"RMSNorm: eps must be >= 0 (it is added to the mean square), got {eps!r}"
            )
        self.dim, self.eps = int(dim), float(eps)
        self.weight = Tensor(np.ones(self.dim), requires_grad=True)  # scale, starts at 1

    def forward(self, x) -> Tensor:
        x = _tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ShapeError(
                f"RMSNorm({self.dim}) got input of shape {x.shape}; its last axis must have "
                f"{self.dim} features"
            )
        return RMSNormFunction.apply(x, self.weight, eps=self.eps)

    def __repr__(self):
        return f"RMSNorm({self.dim}, eps={self.eps})"


# %% [markdown]
# ## 2. Rotary position embedding
#
# GPT-2 adds a learned vector per position to each token: a table that stops at `max_seq_len`
# and that attention must learn to read relative distances out of. Rotary embedding (Su et al.,
# 2021) puts the position into the angle instead. Split a query or key of size `D` into `D/2`
# pairs `(x[2k], x[2k+1])`, and turn pair `k` at position `p` by the angle `p * theta_k`, with
# `theta_k = base^(-2k/D)` (base 10,000 in Llama 2, 500,000 in Llama 3):
#
# ```
# out[2k]   = x[2k] cos(p theta_k) - x[2k+1] sin(p theta_k)
# out[2k+1] = x[2k] sin(p theta_k) + x[2k+1] cos(p theta_k)
# ```
#
# A query at position `m` and a key at position `n`, both rotated, have the dot product of the
# unrotated pair turned by `(m - n) theta_k`: the score depends on the distance, never on the
# absolute position. Nothing is learned, every position has a rotation, and the early pairs turn
# fast (near words) while the late ones turn slowly (far ones).
#
# A rotation's inverse is the rotation by minus the angle, and a rotation is linear, so the
# backward turns the gradient back: the same formula with `sin` negated.
#
# `start` is the position of the first row: with module 17's cache the new token sits at position
# `len(cache)`, not 0. Pairs are interleaved here (dimensions 2k and 2k+1), as in Meta's Llama code;
# Hugging Face pairs dimension k with k + D/2 instead, which the export accounts for.


# %% nbgrader={"grade": false, "grade_id": "rotary", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.llama
def rotary_angles(head_dim: int, positions, theta: float = 10000.0) -> np.ndarray:
    """Angles (T, head_dim / 2) of each position and pair: position * theta^(-2k / head_dim)."""
    ### BEGIN SOLUTION
    freqs = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (D/2,)
    return np.outer(np.asarray(positions, dtype=np.float64), freqs)  # (T, D/2)
    ### END SOLUTION


class RotaryFunction(Function):
    """Turn each pair (x[..., 2k], x[..., 2k+1]) of rows (..., T, D) by its angle (T, D/2)."""

    def forward(self, x, cos, sin):
        self.cos, self.sin = cos.astype(x.dtype), sin.astype(x.dtype)
        ### BEGIN SOLUTION
        even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
        out = np.empty_like(x)
        out[..., 0::2] = even * self.cos - odd * self.sin
        out[..., 1::2] = even * self.sin + odd * self.cos
        return out
        ### END SOLUTION

    def backward(self, grad):
        """The tuple (dx,): one input array, x (cos and sin are keywords, not inputs)."""
        ### BEGIN SOLUTION
        even, odd = grad[..., 0::2], grad[..., 1::2]
        out = np.empty_like(grad)
        out[..., 0::2] = even * self.cos + odd * self.sin  # turned back: -angle
        out[..., 1::2] = odd * self.cos - even * self.sin
        return (out,)
        ### END SOLUTION


class RotaryEmbedding(Module):
    """Rotary positions for heads of size `head_dim`, up to `max_seq_len`; no parameters."""

    def __init__(self, head_dim: int, max_seq_len: int, theta: float = 10000.0):
        if not isinstance(head_dim, (int, np.integer)) or head_dim < 2 or head_dim % 2:
            raise ValueError(
                f"rotary positions turn pairs of features, so head_dim must be even, got "
                f"{head_dim!r}; choose embed_dim and num_heads with an even embed_dim // num_heads"
            )
        if not (theta > 0 and np.isfinite(theta)):
            raise ValueError(f"rotary positions need a positive base theta, got {theta!r}")
        self.head_dim, self.max_seq_len, self.theta = int(head_dim), int(max_seq_len), theta
        angles = rotary_angles(self.head_dim, np.arange(self.max_seq_len), theta)
        self.cos, self.sin = np.cos(angles), np.sin(angles)  # (max_seq_len, D/2), float64

    def forward(self, x, start: int = 0) -> Tensor:
        """Rows (..., T, head_dim) at positions start .. start + T - 1, rotated."""
        x = _tensor(x)
        steps = x.shape[-2] if x.ndim >= 2 else 0
        if x.ndim < 2 or x.shape[-1] != self.head_dim:
            raise ShapeError(
                f"RotaryEmbedding({self.head_dim}) got shape {x.shape}; expected (..., T, "
                f"{self.head_dim})"
            )
        if start < 0 or start + steps > self.max_seq_len:
            raise ShapeError(
                f"positions {start}..{start + steps - 1} are outside the rotary table of "
                f"max_seq_len={self.max_seq_len}; build the model with a larger max_seq_len"
            )
        window = slice(start, start + steps)
        return RotaryFunction.apply(x, cos=self.cos[window], sin=self.sin[window])


# %% [markdown]
# ## 3. SiLU and the SwiGLU feed-forward
#
# GPT-2's MLP is `W2 gelu(W1 x)`. Shazeer (2020) tried *gated* units: two projections of `x`,
# one passed through an activation and used as a gate on the other,
#
# $$\mathrm{SwiGLU}(x) = W_2\,(\mathrm{silu}(W_1 x) \odot W_3 x), \qquad \mathrm{silu}(x) = x\,\sigma(x)$$
#
# and found lower loss at the same compute. Three matrices instead of two, so Llama shrinks the
# hidden size to keep the parameter count of a 4x MLP: `2/3 * 4C`, rounded up to a multiple of
# `multiple_of` (256 in Llama; 4096 gives 11008). Write `llama_hidden_dim` with that rule.
#
# SiLU (also called swish) is smooth, like GELU, and its derivative is short: with `s = sigmoid(x)`,
# `d silu / dx = s + x s (1 - s) = s (1 + x (1 - s))`. Write it as a `Function` (with a sigmoid
# that cannot overflow for large |x|: module 02's way, or `(1 + tanh(x / 2)) / 2`) and
# `SwiGLU.forward`.


# %% nbgrader={"grade": false, "grade_id": "swiglu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.llama
class SiLUFunction(Function):
    """x * sigmoid(x) elementwise."""

    def forward(self, x):
        ### BEGIN SOLUTION
        self.x, self.s = x, 0.5 * (1 + np.tanh(0.5 * x))  # sigmoid(x) through tanh: no overflow
        return x * self.s
        ### END SOLUTION

    def backward(self, grad):
        """The tuple (dx,), a 1-tuple for the one input."""
        ### BEGIN SOLUTION
        return (grad * self.s * (1 + self.x * (1 - self.s)),)
        ### END SOLUTION


def silu(x) -> Tensor:
    """x * sigmoid(x) (PyTorch's `F.silu`)."""
    return SiLUFunction.apply(_tensor(x))


class SiLU(Module):
    """x * sigmoid(x), as a layer."""

    def forward(self, x) -> Tensor:
        return silu(x)


def llama_hidden_dim(embed_dim: int, multiple_of: int = 256) -> int:
    """Llama's SwiGLU width: 2/3 of 4 * embed_dim, rounded up to a multiple of `multiple_of`."""
    ### BEGIN SOLUTION
    hidden = int(2 * (4 * embed_dim) / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)
    ### END SOLUTION


class SwiGLU(Module):
    """Gated feed-forward w2(silu(w1 x) * w3 x), no biases; `hidden_dim` by Llama's rule."""

    def __init__(self, embed_dim: int, hidden_dim: int | None = None, multiple_of: int = 256):
        if hidden_dim is None:
            if not isinstance(multiple_of, (int, np.integer)) or multiple_of < 1:
                raise ValueError(
                    f"SwiGLU: multiple_of must be a positive integer, got {multiple_of!r}"
                )
            hidden_dim = llama_hidden_dim(embed_dim, multiple_of)
        self.w1 = Linear(embed_dim, hidden_dim, bias=False)  # the gate, through SiLU
        self.w3 = Linear(embed_dim, hidden_dim, bias=False)  # the value it gates
        self.w2 = Linear(hidden_dim, embed_dim, bias=False)  # back to the residual stream

    def forward(self, x) -> Tensor:
        ### BEGIN SOLUTION
        return self.w2(silu(self.w1(x)) * self.w3(x))  # (B, T, C) -> (B, T, H) -> (B, T, C)
        ### END SOLUTION


# %% [markdown]
# ## 4. Grouped-query attention
#
# While generating, module 17's cache keeps every layer's keys and values:
# `2 x layers x heads x head_dim` numbers per token. For Llama 2 70B in 16 bits, with 64 heads of
# 128 over 80 layers, that is 2.6 MB per token; a 4,096-token context takes 10.7 GB, and sixteen
# such conversations served together 172 GB, more than the 140 GB of the weights themselves.
# Ainslie et al. (2023) let groups of query heads
# share one key/value head: `num_kv_heads` of them, each serving `num_heads / num_kv_heads`
# query heads. Llama 2 70B uses 8 for its 64 heads: the cache is 8 times smaller, at almost no
# cost in quality. `num_kv_heads = 1` is multi-query attention (Shazeer, 2019); `num_kv_heads =
# num_heads` is module 12's multi-head attention.
#
# The projections: `q_proj` `(C, H D)` as before, `k_proj` and `v_proj` `(C, H_kv D)`, smaller.
# No biases (Llama has none anywhere). Then:
#
# 1. split into heads: q `(B, H, T, D)`, k and v `(B, H_kv, T, D)`; rotate q and k at positions
#    `start ..` (section 2);
# 2. with a cache, append k and v to it (module 17's `KVCache` stores only the `H_kv` heads) and
#    use everything it holds;
# 3. query head `h` reads key/value head `h // G`, where `G = H / H_kv`: reshape q to
#    `(B, H_kv, G, T, D)` and k, v to `(B, H_kv, 1, T_k, D)`; module 12's
#    `scaled_dot_product_attention` broadcasts the group axis, so no key is copied (the engine
#    sums the groups' gradients back into the shared head);
# 4. merge the heads back to `(B, T, C)` and apply `out_proj`.


# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def check_kv_heads(num_heads: int, num_kv_heads: int) -> None:
    """One clear ValueError unless the query heads split evenly into num_kv_heads groups."""
    if isinstance(num_kv_heads, bool) or not isinstance(num_kv_heads, (int, np.integer)):
        raise ValueError(f"num_kv_heads must be a positive integer, got {num_kv_heads!r}")
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        fits = [g for g in range(1, num_heads + 1) if num_heads % g == 0]
        raise ValueError(
            f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}; each key/value "
            f"head serves an equal group of query heads: choose num_kv_heads from {fits}"
        )


class GroupedQueryAttention(Module):
    """Attention with rotary q and k; `num_kv_heads` key/value heads shared by groups.

    Causal only through the caller's mask, as module 12's MultiHeadAttention: `Llama.forward`
    passes module 12's `causal_mask`; with `mask=None` every position sees every other. A
    `cache` (module 17) holds keys and values as arrays, for inference: no gradient reaches
    k_proj and v_proj through them (`Llama.forward` refuses a backward through its caches).
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int | None = None,
                 max_seq_len: int = 1024, rope_theta: float = 10000.0):  # fmt: skip
        check_heads(embed_dim, num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_kv_heads(num_heads, num_kv_heads)
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        kv_dim = num_kv_heads * self.head_dim
        self.q_proj = Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = Linear(embed_dim, kv_dim, bias=False)  # smaller: H_kv heads
        self.v_proj = Linear(embed_dim, kv_dim, bias=False)
        self.out_proj = Linear(embed_dim, embed_dim, bias=False)
        self.rotary = RotaryEmbedding(self.head_dim, max_seq_len, rope_theta)

    def _split(self, x: Tensor, heads: int) -> Tensor:
        """(B, T, heads * D) -> (B, heads, T, D)."""
        batch, steps, _ = x.shape
        return x.reshape(batch, steps, heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask=None, start: int = 0, cache: KVCache | None = None) -> Tensor:
        """(B, T, C) -> (B, T, C) for positions start ..; `cache` (module 17) extends the keys."""
        x = x if isinstance(x, Tensor) else Tensor(x)
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            raise ShapeError(
                f"GroupedQueryAttention: x must have shape (batch, seq_len, {self.embed_dim}), "
                f"got {x.shape}"
            )
        batch, steps, _ = x.shape
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        ### BEGIN SOLUTION
        q = self.rotary(self._split(self.q_proj(x), heads), start)  # (B, H, T, D)
        k = self.rotary(self._split(self.k_proj(x), kv_heads), start)  # (B, H_kv, T, D)
        v = self._split(self.v_proj(x), kv_heads)  # (B, H_kv, T, D)
        if cache is not None:  # generation: the kv heads of every earlier position
            k_all, v_all = cache.append(k.data, v.data)
            k, v = Tensor(k_all), Tensor(v_all)  # (B, H_kv, T_k, D)
        keys = k.shape[2]
        groups = heads // kv_heads
        q = q.reshape(batch, kv_heads, groups, steps, dim)  # head h in group h // G
        k = k.reshape(batch, kv_heads, 1, keys, dim)  # shared by the group
        v = v.reshape(batch, kv_heads, 1, keys, dim)
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, H_kv, G, T, D)
        out = out.reshape(batch, heads, steps, dim).permute(0, 2, 1, 3)  # (B, T, H, D)
        return self.out_proj(out.reshape(batch, steps, self.embed_dim))
        ### END SOLUTION

    def __repr__(self):
        return (
            f"GroupedQueryAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads})"
        )


# %% [markdown]
# ## 5. The Llama block and model
#
# The block is module 13's pre-norm block with the new parts:
#
# ```
# x = x + attention(attention_norm(x))        attention_norm, ffn_norm: RMSNorm
# x = x + feed_forward(ffn_norm(x))           feed_forward: SwiGLU
# ```
#
# The model has no position table: positions enter only through the rotation of q and k. It
# ends with an RMSNorm and a projection to the vocabulary (its own `lm_head` without a bias, or
# the token embedding transposed when `tie_weights`). Sizes come from module 13's one table,
# `PRESETS`: `Llama.from_config("small", num_kv_heads=2)` is the `small` GPT's width, depth and
# heads with Llama's parts.
#
# Write `LlamaBlock.forward` and `Llama.forward`. `forward(tokens, caches)` with module 17's
# caches (one per block, from `new_caches()`) continues the cached positions: the new tokens
# start at `len(caches[0])`, and the causal mask is `causal_mask(T, past_len=start)`.


# %% nbgrader={"grade": false, "grade_id": "config", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
@dataclass
class LlamaConfig:
    vocab_size: int
    embed_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int | None = None  # None: one per query head (multi-head attention)
    max_seq_len: int = 1024  # the rotary table's length
    hidden_dim: int | None = None  # SwiGLU width; None: llama_hidden_dim(embed_dim, multiple_of)
    multiple_of: int = 256
    rope_theta: float = 10000.0  # Llama 2; Llama 3 uses 500000
    norm_eps: float = 1e-5
    tie_weights: bool = False  # Llama 2 and 3 keep their own output projection

    def __post_init__(self):
        """One clear ValueError for a setting that would give NaNs or divide by zero."""
        if not (self.rope_theta > 0 and np.isfinite(self.rope_theta)):
            raise ValueError(
                f"Llama: rope_theta must be a positive number, got {self.rope_theta!r}"
            )
        if not self.norm_eps >= 0:
            raise ValueError(f"Llama: norm_eps must be >= 0, got {self.norm_eps!r}")
        for name, value in (("multiple_of", self.multiple_of), ("hidden_dim", self.hidden_dim)):
            if name == "hidden_dim" and value is None:  # None: Llama's rule gives the width
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"Llama: {name} must be a positive integer, got {value!r}")


def llama_config(name: str, **changes) -> LlamaConfig:
    """A preset of module 13's one table (`PRESETS`) with Llama's parts, and `changes`."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    size = PRESETS[name]
    sizes = dict(vocab_size=size.vocab_size, embed_dim=size.embed_dim,
                 num_layers=size.num_layers, num_heads=size.num_heads,
                 max_seq_len=size.max_seq_len, tie_weights=size.tie_weights)  # fmt: skip
    if size.embed_dim < 1024:  # the character-level sizes: 256 would dwarf their width
        sizes["multiple_of"] = 16
    return LlamaConfig(**{**sizes, **changes})


def init_llama_weights(model: Module, num_layers: int, std: float = 0.02) -> None:
    """N(0, std) for every matrix, std / sqrt(2 L) for the two that write into the residual
    stream (out_proj, w2), as GPT-2 does; the norms' scales stay 1."""
    residual_std = std / np.sqrt(2 * num_layers)
    rng = np.random.default_rng(np.random.randint(2**31))  # seeded by np.random.seed
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            continue
        rng.standard_normal(out=p.data, dtype=p.dtype)
        p.data *= residual_std if name.endswith(("out_proj.weight", "w2.weight")) else std


class _InferenceOnly(Function):
    """The logits of a cached forward, unchanged (the parameters only make them a graph node);
    a backward through them raises instead of leaving k_proj and v_proj without gradient."""

    def forward(self, logits, *parameters):
        return logits

    def backward(self, grad):
        raise RuntimeError(
            "backward() through Llama.forward(tokens, caches): the KV caches hold keys and values "
            "as arrays, for inference; train on forward(tokens) without caches"
        )


# %% nbgrader={"grade": false, "grade_id": "model", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class LlamaBlock(Module):
    """Pre-norm block: RMSNorm -> grouped-query attention, RMSNorm -> SwiGLU, residuals."""

    def __init__(self, config: LlamaConfig):
        c = config
        self.attention_norm = RMSNorm(c.embed_dim, c.norm_eps)
        self.attention = GroupedQueryAttention(c.embed_dim, c.num_heads, c.num_kv_heads,
                                               c.max_seq_len, c.rope_theta)  # fmt: skip
        self.ffn_norm = RMSNorm(c.embed_dim, c.norm_eps)
        self.feed_forward = SwiGLU(c.embed_dim, c.hidden_dim, c.multiple_of)

    def forward(self, x, mask=None, start: int = 0, cache: KVCache | None = None) -> Tensor:
        """(B, T, C) -> (B, T, C)."""
        ### BEGIN SOLUTION
        x = x + self.attention(self.attention_norm(x), mask, start, cache)
        return x + self.feed_forward(self.ffn_norm(x))
        ### END SOLUTION


class Llama(Module):
    """Decoder-only language model with Llama's parts: tokens (B, T) -> logits (B, T, vocab)."""

    def __init__(self, vocab_size: int, embed_dim: int, num_layers: int, num_heads: int,
                 num_kv_heads: int | None = None, max_seq_len: int = 1024,
                 hidden_dim: int | None = None, multiple_of: int = 256,
                 rope_theta: float = 10000.0, norm_eps: float = 1e-5,
                 tie_weights: bool = False):  # fmt: skip
        sizes = dict(vocab_size=vocab_size, embed_dim=embed_dim, num_layers=num_layers,
                     max_seq_len=max_seq_len)  # fmt: skip
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"Llama: {name} must be a positive integer, got {value!r}")
        check_heads(embed_dim, num_heads)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_kv_heads(num_heads, num_kv_heads)
        self.config = LlamaConfig(vocab_size, embed_dim, num_layers, num_heads, num_kv_heads,
                                  max_seq_len, hidden_dim, multiple_of, rope_theta, norm_eps,
                                  tie_weights)  # fmt: skip
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.blocks = [LlamaBlock(self.config) for _ in range(num_layers)]
        self.norm = RMSNorm(embed_dim, norm_eps)
        self.lm_head = None if tie_weights else Linear(embed_dim, vocab_size, bias=False)
        init_llama_weights(self, num_layers)

    @classmethod
    def from_config(cls, config: LlamaConfig | str, **changes) -> Llama:
        """Build from a LlamaConfig or a name in PRESETS ("tiny", ...), with `changes`."""
        if isinstance(config, str):
            return cls(**asdict(llama_config(config, **changes)))
        return cls(**{**asdict(config), **changes})

    def load_state_dict(self, state: dict) -> None:
        """Our names and layout, or PyTorch's: Meta's or Hugging Face's, weights (out, in)."""
        if spelling(state) != "ours":  # the given models/llama_weights.py translates
            state = ours_from_torch(state, self.config)
        super().load_state_dict(state)

    def new_caches(self) -> list[KVCache]:
        """One empty module-17 KVCache per block, for `forward(tokens, caches)`."""
        return [KVCache(max_len=self.max_seq_len) for _ in self.blocks]

    def forward(self, tokens, caches: list[KVCache] | None = None) -> Tensor:
        """Logits (B, T, vocab_size); with `caches`, the tokens continue the cached positions.

        Caches are for inference: they keep earlier keys and values as arrays, so no gradient
        could reach k_proj and v_proj through them; a backward through such logits raises.
        """
        if caches is not None and len(caches) != len(self.blocks):
            raise ShapeError(
                f"Llama.forward got {len(caches)} caches for {len(self.blocks)} blocks; pass "
                "one per block, as new_caches() gives"
            )
        if caches is not None and is_grad_enabled():  # the values, and a backward that refuses
            with no_grad():
                logits = self.forward(tokens, caches)
            return _InferenceOnly.apply(logits, *self.parameters())
        ids = token_ids_2d(tokens, self.vocab_size)
        steps = ids.shape[1]
        start = 0 if caches is None else len(caches[0])
        if start + steps > self.max_seq_len:
            raise ShapeError(
                f"{start} cached + {steps} new positions exceed max_seq_len={self.max_seq_len}; "
                f"crop to the last {self.max_seq_len} tokens (generate() does this for you)"
            )
        caches = [None] * len(self.blocks) if caches is None else caches
        ### BEGIN SOLUTION
        x = self.token_embedding(ids)  # (B, T, C): no position vectors
        mask = None if steps == 1 else Tensor(causal_mask(steps, past_len=start))
        for block, cache in zip(self.blocks, caches):
            x = block(x, mask, start, cache)
        x = self.norm(x)
        if self.lm_head is None:
            return x @ self.token_embedding.weight.transpose()  # (B, T, vocab_size), tied
        return self.lm_head(x)  # (B, T, vocab_size)
        ### END SOLUTION

    # The next logits and the sampling loop are given: module 13's steps, on this model.
    def _next_logits(self, tokens: np.ndarray, caches) -> np.ndarray:
        """Logits (B, V) of the next position, reading the caches while the context fits."""
        if caches is None:
            return self.forward(tokens[:, -self.max_seq_len :]).data[:, -1]
        held = len(caches[0])  # positions the caches hold
        extends = held == tokens.shape[1] - 1 and held < self.max_seq_len
        if not extends:  # the first step, or the window slid: every position moved
            for cache in caches:
                cache.reset()
        new = tokens[:, -1:] if extends else tokens[:, -self.max_seq_len :]
        return self.forward(new, caches).data[:, -1]  # one new position, or the window

    @no_grad()
    def generate(self, prompt_tokens, max_new_tokens=50, temperature=1.0, top_k=None, seed=None,
                 use_cache=True, stop_token=None, top_p=None,
                 repetition_penalty=1.0) -> np.ndarray:  # fmt: skip
        """Continue every prompt row, as GPT.generate does; returns ids (B, prompt + new).

        `use_cache` (default True) keeps the kv heads in module 17's caches; False recomputes the
        context every step. The tokens are the same either way; an accelerated Llama runs
        these steps in one numpy pass a token (the given tinytorch/accel/decode_llama.py).
        """
        steer = {"stop_token": stop_token, "top_p": top_p, "repetition_penalty": repetition_penalty}
        fast = getattr(self, "fast_generation", None)  # set by module 18's accelerate
        if use_cache and fast is not None and fast.runs(self):
            return fast.cached_generate(self, prompt_tokens, max_new_tokens, temperature, top_k,
                                        seed, **steer)  # fmt: skip
        _check_generate_args(max_new_tokens, temperature, top_k, self.vocab_size, stop_token)
        tokens = token_ids_2d(prompt_tokens, self.vocab_size)  # (B, T)
        caches = self.new_caches() if use_cache else None
        return sampling_loop(tokens, lambda ids: self._next_logits(ids, caches), sample_next,
                             max_new_tokens, temperature=temperature, top_k=top_k, seed=seed,
                             context=self.max_seq_len, **steer)  # fmt: skip


# %% [markdown]
# ## 6. What each part buys
#
# Counted per block, width `C`, `H` heads of `D`, `H_kv` kv heads:
#
# | | GPT-2 block | Llama block |
# |---|---|---|
# | norms | `4C` (two gamma, two beta) | `2C` (two scales) |
# | attention | `4C^2 + 4C` | `2C^2 + 2 C H_kv D` |
# | feed-forward | `8C^2 + 5C` | `3 C hidden`, hidden about `8C/3`: `8C^2` |
# | KV cache per token | `2 C` numbers | `2 H_kv D` numbers: `H / H_kv` times fewer |
#
# plus, for GPT-2, `max_seq_len x C` learned positions that Llama does not need. The milestone
# (`tito milestone run llama`) trains the two at the same parameter count on the same text for the
# same time and prints bits per character, tokens per second and the cache's bytes per token; the
# export (`tito model export`) writes the trained Llama as a Hugging Face `LlamaForCausalLM`.
#
# One such run (`--quick`: the `tiny` sizes, 110 thousand parameters each, 12 CPU seconds each on
# characters of Python's documentation) ended at 2.74 bits per character for the Llama against
# 3.41 for the GPT, with 12% more steps in the same time and half the cache (512 bytes a token
# against 1,024); at the default `small` sizes (810 thousand parameters, 120 CPU seconds each),
# 2.11 against 2.48. The run does not say which part earned how much: swapping one part at a time
# (a GPT with RMSNorm, then with rotary positions, ...) and training again is a good exercise.


# %% [markdown]
# ## Try it

# %%
np.random.seed(0)
llama = Llama.from_config("tiny", num_kv_heads=2)
prompt = np.array([[1, 2, 3], [4, 5, 6]])
print(llama(prompt).shape, llama.generate(prompt, max_new_tokens=5, temperature=0.8, seed=0).shape)
print(sum(p.size for p in llama.parameters()), "parameters")

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs on a seeded generator, asserts what must hold,
# and returns the numbers (outputs and gradients) a grader compares with the reference's.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded
from tinytorch.core.autograd import numerical_gradient  # module 05's central differences
from tinytorch.core.tensor import precision


def weighted_grads(build, arrays, weight) -> list[np.ndarray]:
    """Gradients of sum(build(*tensors) * weight) for each array, by the engine, in float64."""
    with precision(np.float64):
        tensors = [Tensor(a, requires_grad=True) for a in arrays]
        (build(*tensors) * Tensor(weight)).sum().backward()
        return [t.grad for t in tensors]


def differences(build, arrays, weight) -> list[np.ndarray]:
    """The same gradients by central differences (module 05)."""
    with precision(np.float64):
        loss = lambda: float(np.sum(build(*[Tensor(a) for a in arrays]).data * weight))  # noqa: E731
        return [numerical_gradient(loss, a) for a in arrays]


def grads_of(module) -> np.ndarray:
    """Every parameter's gradient, in the module's own order, as one array."""
    return np.concatenate([np.ravel(p.grad) for p in module.parameters()])


# %% nbgrader={"grade": true, "grade_id": "test-rmsnorm", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="rmsnorm")
def test_rmsnorm_forward_and_backward(rng):
    x, w = rng.normal(1.0, 2.0, (3, 4, 8)), rng.uniform(0.5, 1.5, 8) * rng.choice([-1, 1], 8)
    weight = rng.normal(size=(3, 4, 8))

    def build(xt, wt):
        norm = RMSNorm(8)
        norm.weight = wt
        return norm(xt)

    y = build(Tensor(x), Tensor(w)).data
    rms = np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, x / rms * w, rtol=1e-4, atol=1e-5)
    got = weighted_grads(build, [x, w], weight)
    for g, n in zip(got, differences(build, [x, w], weight)):
        np.testing.assert_allclose(g, n, rtol=1e-5, atol=1e-7)
    return {"y": y, "dx": got[0], "dw": got[1]}


# %% nbgrader={"grade": true, "grade_id": "test-rotary", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="rotary")
def test_rotary_turns_pairs_by_position(rng):
    rotary = RotaryEmbedding(8, 16, theta=100.0)
    q, k = rng.normal(size=(1, 1, 8)), rng.normal(size=(1, 1, 8))
    with precision(np.float64):  # the score depends on the distance only
        scores = [float((rotary(Tensor(q), m).data * rotary(Tensor(k), m - 3).data).sum())
                  for m in (3, 7, 12)]  # fmt: skip
    np.testing.assert_allclose(scores, scores[0], rtol=1e-9, atol=1e-12)
    x, weight = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    start = int(rng.integers(0, 10))

    def build(xt):
        return rotary(xt, start)

    with precision(np.float64):
        y = build(Tensor(x)).data
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1))
    (got,) = weighted_grads(build, [x], weight)
    np.testing.assert_allclose(got, differences(build, [x], weight)[0], rtol=1e-5, atol=1e-7)
    return {"y": y, "dx": got, "angles": rotary_angles(8, [0, 1, 5], 100.0)}


# %% nbgrader={"grade": true, "grade_id": "test-swiglu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="swiglu")
def test_silu_and_swiglu(rng):
    x, weight = rng.normal(0.0, 4.0, (4, 6)), rng.normal(size=(4, 6))
    y = silu(Tensor(x)).data
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    (dx,) = weighted_grads(silu, [x], weight)
    np.testing.assert_allclose(dx, differences(silu, [x], weight)[0], rtol=1e-5, atol=1e-7)
    assert llama_hidden_dim(4096) == 11008
    widths = np.array([llama_hidden_dim(c, m) for c, m in ((48, 16), (100, 8), (4096, 256))])
    np.random.seed(int(rng.integers(1 << 30)))
    ff = SwiGLU(6, hidden_dim=10)
    xt = Tensor(x, requires_grad=True)
    out = ff(xt)
    (out * Tensor(weight)).sum().backward()
    return {"y": y, "dx": dx, "widths": widths, "ff": out.data, "ff_dx": xt.grad,
            "ff_dparams": grads_of(ff)}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades="attention")
def test_grouped_query_attention(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    attn = GroupedQueryAttention(16, num_heads=4, num_kv_heads=2, max_seq_len=12)
    assert attn.k_proj.weight.shape == (16, 8) and attn.q_proj.weight.shape == (16, 16)
    x = rng.normal(size=(2, 6, 16)).astype(np.float32)
    xt = Tensor(x, requires_grad=True)
    out = attn(xt, causal_mask(6))
    (out * Tensor(rng.normal(size=out.shape).astype(np.float32))).sum().backward()
    changed = x.copy()
    changed[:, 4:] = 0  # a later position never changes an earlier output
    with no_grad():
        np.testing.assert_allclose(attn(changed, causal_mask(6)).data[:, :4], out.data[:, :4],
                                   atol=1e-5)  # fmt: skip
        cache = KVCache()
        parts = [attn(x[:, :2], causal_mask(2), 0, cache).data]
        parts += [attn(x[:, t : t + 1], None, t, cache).data for t in range(2, 6)]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), out.data, rtol=1e-4, atol=1e-5)
    assert cache.k.shape == (2, 2, 6, 4)  # only the kv heads are kept
    return {"out": out.data, "dx": xt.grad, "dparams": grads_of(attn)}


# %% nbgrader={"grade": true, "grade_id": "test-llama", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades="model")
def test_llama_is_causal_and_generates(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    llama = Llama(vocab_size=20, embed_dim=16, num_layers=2, num_heads=4, num_kv_heads=2,
                  max_seq_len=8, multiple_of=8)  # fmt: skip
    for p in llama.parameters():  # sharper than the init, so the logits differ by token
        p.data *= 5 if p.ndim == 2 else rng.uniform(0.5, 1.5, p.shape)
    tokens = rng.integers(0, 20, size=(2, 5))
    logits = llama(tokens).data
    assert logits.shape == (2, 5, 20)
    changed = tokens.copy()
    changed[:, 3:] = 0
    np.testing.assert_allclose(llama(changed).data[:, :3], logits[:, :3], atol=1e-5)
    out = llama.generate(tokens, max_new_tokens=6, temperature=0)  # runs past max_seq_len
    again = llama.generate(tokens, max_new_tokens=6, temperature=0, use_cache=False)
    np.testing.assert_array_equal(out, again)
    loss = llama(tokens)
    (loss * Tensor(rng.normal(size=loss.shape).astype(np.float32))).sum().backward()
    tied = Llama(vocab_size=20, embed_dim=16, num_layers=1, num_heads=4, num_kv_heads=2,
                 max_seq_len=8, multiple_of=8, tie_weights=True)  # fmt: skip
    tied_logits = tied(tokens)  # the head's gradient reaches the shared embedding
    (tied_logits * Tensor(rng.normal(size=tied_logits.shape).astype(np.float32))).sum().backward()
    return {"logits": logits, "dparams": grads_of(llama), "greedy": out,
            "tied": tied_logits.data, "tied_dparams": grads_of(tied)}  # fmt: skip
