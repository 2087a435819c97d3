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
# # Module 12 — Attention
#
# Attention lets every position of a sequence gather information from every other position,
# weighted by how relevant it is. Each position asks a **query** `q`; every position offers a
# **key** `k` and a **value** `v`. The weight of key j for query i is a softmax over how well they
# match, and the answer is the weighted average of the values:
#
#     scores  = q @ kᵀ / sqrt(d)            (..., T_q, T_k)
#     weights = softmax(scores + mask)      each row sums to 1
#     output  = weights @ v                 (..., T_q, d_v)
#
# **Why divide by sqrt(d)?** A dot product of two d-dimensional vectors with unit-variance
# entries has variance d. Without the scale, large d pushes the softmax into a near one-hot
# regime whose gradients vanish.
#
# **Masks are added, not multiplied.** A mask holds 0 where attention is allowed and -inf where
# it is blocked; `exp(-inf) = 0`, so a blocked key gets exactly zero weight. A **causal** mask
# blocks the future (GPT); a **padding** mask blocks the padded tail of shorter sequences in a
# batch. A row that may attend to nothing at all would compute 0/0; module 02's softmax makes its
# weights (and so the output) zero instead of NaN.
#
# **Autograd does the backward.** Attention is four Tensor operations you already have: a batched
# matmul, an addition, module 02's softmax and another matmul. Each records its node, so
# `out.backward()` reaches q, k and v without a line of backward code here. (Module 18 writes the
# same computation as one fused node with a hand-derived backward, and tests it against yours.)
#
# **Multi-head attention** runs H attentions of size d = embed_dim / H side by side, each free to
# look for something different. All heads run at once: the tensors are reshaped from
# `(B, T, E)` to `(B, H, T, D)` and every matmul is batched over `(B, H)`.

# %%
#| default_exp core.attention

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

from pathlib import Path

import numpy as np

from tinytorch.core.activations import softmax
from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import ShapeError, Tensor


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def _mask_array(mask, scores_shape: tuple, dtype, hint: str = "") -> np.ndarray | None:
    """An additive mask as an array of `dtype`, checked to broadcast to the scores' shape."""
    if mask is None:
        return None
    values = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if values.dtype == bool:
        raise TypeError(
            "attention masks are additive floats (0 attends, -inf blocks), got a boolean mask; "
            "convert it with np.where(allowed, 0.0, -np.inf)"
        )
    if values.dtype.kind not in "iuf":
        raise TypeError(f"attention mask must hold numbers, got dtype {values.dtype}")
    try:
        fits = np.broadcast_shapes(values.shape, scores_shape) == tuple(scores_shape)
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(
            f"attention mask of shape {values.shape} does not broadcast to the scores' shape "
            f"{tuple(scores_shape)} (batch, heads, T_q, T_k); use (T_q, T_k) or "
            f"(batch, 1, 1, T_k){hint}"
        )
    return values.astype(dtype, copy=False)


# %% [markdown]
# ## Masks
#
# `causal_mask(seq_len)` is the course's matrix `np.triu(np.ones((T, T)) * -np.inf, k=1)`: query i may
# see keys 0..i. When `past_len` earlier positions come first (module 17's KV cache keeps them),
# the mask becomes `(seq_len, past_len + seq_len)` and query i sees keys 0..past_len + i.
#
# `padding_mask(lengths, seq_len)` blocks, for each batch row b, the keys at positions
# `lengths[b]` and later. Its shape `(B, 1, 1, T)` broadcasts over heads and queries.
#
# Both masks are **float32** arrays, the dtype of the package's tensors. The course's formula
# above gives float64 (`np.ones` does), so build the matrix as float32 (`np.full(shape, -np.inf,
# dtype=np.float32)`, or `.astype(np.float32)`). Attention casts a mask to the scores' dtype, so
# the values would not change; but `scores + mask` in plain numpy, with float32 scores and a
# float64 mask, gives float64 scores at twice the memory.


# %% nbgrader={"grade": false, "grade_id": "masks", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def causal_mask(seq_len: int, past_len: int = 0) -> np.ndarray:
    """(seq_len, past_len + seq_len) additive mask: 0 on and below the diagonal, -inf above."""
    if seq_len < 0 or past_len < 0:
        raise ValueError(f"causal_mask: sizes must be >= 0, got {seq_len=}, {past_len=}")
    ### BEGIN SOLUTION
    blocked = np.full((seq_len, past_len + seq_len), -np.inf, dtype=np.float32)
    return np.triu(blocked, k=past_len + 1)
    ### END SOLUTION


def padding_mask(lengths, seq_len: int) -> np.ndarray:
    """(B, 1, 1, seq_len) additive mask blocking key positions >= lengths[b] in row b."""
    lengths = np.asarray(lengths.data if isinstance(lengths, Tensor) else lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iuf":
        raise ValueError(f"padding_mask needs a 1-D list of lengths, got shape {lengths.shape}")
    if np.any(lengths < 0) or np.any(lengths > seq_len) or np.any(lengths != np.round(lengths)):
        raise ValueError(
            f"padding_mask: lengths {lengths.tolist()} must be whole numbers in [0, {seq_len}]"
        )
    ### BEGIN SOLUTION
    keep = np.arange(seq_len) < lengths[:, None]  # (B, T)
    mask = np.where(keep, 0.0, -np.inf).astype(np.float32)
    return mask[:, None, None, :]  # (B, 1, 1, T)
    ### END SOLUTION


# %% [markdown]
# ## Scaled dot-product attention
#
# `scaled_dot_product_attention(q, k, v, mask=None)` takes Tensors (or arrays) of shape
# `(..., T, D)` and returns `(output, weights)`, both Tensors in the graph. The given code checks
# the shapes and turns the mask into an array of the scores' dtype; you write the four lines of
# the formula at the top of this page:
#
# - the scores `q @ kᵀ / sqrt(D)`: `k.transpose(-2, -1)` swaps its last two axes, and `@` is
#   batched over every leading axis;
# - plus the mask, if there is one (as a Tensor);
# - module 02's `softmax` over the last axis (the keys);
# - the weighted sum of the values.
#
# Divide by a Python float (`D ** 0.5`), not by a numpy float64 scalar, so float32 stays float32.


# %% nbgrader={"grade": false, "grade_id": "sdpa", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_qkv(q_shape, k_shape, v_shape) -> tuple:
    """The scores' shape (..., T_q, T_k), or a one-line error naming the shapes that disagree."""
    shapes = f"q {q_shape}, k {k_shape}, v {v_shape}"
    if min(len(q_shape), len(k_shape), len(v_shape)) < 2:
        raise ShapeError(f"attention needs inputs of shape (..., T, D), got {shapes}")
    if q_shape[-1] != k_shape[-1]:
        raise ShapeError(f"attention: q and k must share their last axis (D), got {shapes}")
    if k_shape[-2] != v_shape[-2]:
        raise ShapeError(f"attention: k and v must have the same length (T_k), got {shapes}")
    try:
        batch = np.broadcast_shapes(q_shape[:-2], k_shape[:-2], v_shape[:-2])
    except ValueError:
        raise ShapeError(f"attention: batch axes do not broadcast, got {shapes}") from None
    return (*batch, q_shape[-2], k_shape[-2])


def scaled_dot_product_attention(q, k, v, mask=None) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ / sqrt(D) + mask) v for (..., T, D) inputs; returns (output, weights)."""
    q, k, v = _tensor(q), _tensor(k), _tensor(v)
    scores_shape = _check_qkv(q.shape, k.shape, v.shape)
    mask = _mask_array(mask, scores_shape, q.dtype)
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., T_q, T_k)
    if mask is not None:
        scores = scores + Tensor(mask)  # 0 keeps a score, -inf blocks it
    weights = softmax(scores, axis=-1)  # each row sums to 1 over the keys
    return weights @ v, weights  # (..., T_q, D_v), (..., T_q, T_k)
    ### END SOLUTION


# %% [markdown]
# ## `MultiHeadAttention`
#
# `forward(query, mask=None, *, key=None, value=None)`:
#
# - **self-attention** `attn(x, mask)`: q, k and v all come from `x` (the course's
#   `self.attention(normed, mask)`);
# - **cross-attention** `attn(x, key=memory, value=memory, mask=...)`: queries from `x`, keys and
#   values from another sequence (its length may differ; `value` defaults to `key`).
#
# Generation that keeps earlier keys and values instead of recomputing them is module 17's
# lesson (Memoization); this class stays the plain computation.
#
# You write the two reshapes and the forward:
#
# - `_split_heads`: `(B, T, E) -> (B, T, H, D) -> (B, H, T, D)` with `reshape` and `permute`;
# - `_merge_heads`: the way back, `(B, H, T, D) -> (B, T, H, D) -> (B, T, E)`, then `out_proj`
#   mixes the heads;
# - `forward`: project q from the query and k, v from the key and value (`q_proj`, `k_proj`,
#   `v_proj`), split each into heads, call `scaled_dot_product_attention`, merge.
#
# `last_attention` keeps the latest weights `(B, H, T_q, T_k)` as a numpy array (set
# `keep_attention = False` to save that memory during long training runs).


# %% nbgrader={"grade": false, "grade_id": "mha", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def check_heads(embed_dim: int, num_heads: int) -> None:
    """One clear ValueError unless num_heads heads of whole size can share embed_dim features.

    The one check of head counts: MultiHeadAttention makes it, and the transformer models of
    module 13 make it first, before they build anything.
    """
    for label, n in (("embed_dim", embed_dim), ("num_heads", num_heads)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"{label} must be a positive integer, got {n!r}")
    if embed_dim % num_heads:
        fits = [h for h in range(1, embed_dim + 1) if embed_dim % h == 0]
        raise ValueError(
            f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}, so the heads "
            f"cannot split it evenly; choose num_heads from {fits[:12]}"
        )


class MultiHeadAttention(Module):
    """num_heads attentions of size embed_dim // num_heads, computed together."""

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True):
        check_heads(embed_dim, num_heads)
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        self.q_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.keep_attention = True
        self.last_attention: np.ndarray | None = None

    def _check_input(self, name: str, x: Tensor) -> None:
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            raise ShapeError(
                f"MultiHeadAttention: {name} must have shape (batch, seq_len, {self.embed_dim}), "
                f"got {x.shape}"
            )

    def _split_heads(self, x: Tensor) -> Tensor:
        """(B, T, E) -> (B, H, T, D): each head gets its own slice of the features."""
        batch, steps, _ = x.shape
        ### BEGIN SOLUTION
        return x.reshape(batch, steps, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        ### END SOLUTION

    def _merge_heads(self, out: Tensor) -> Tensor:
        """(B, H, T, D) head outputs -> (B, T, E), mixed by out_proj."""
        batch, _, steps, _ = out.shape
        ### BEGIN SOLUTION
        merged = out.permute(0, 2, 1, 3).reshape(batch, steps, self.embed_dim)  # (B, T, E)
        return self.out_proj(merged)
        ### END SOLUTION

    def forward(self, query, mask=None, *, key=None, value=None):
        """(B, T_q, E) -> (B, T_q, E); self-attention unless key (and value) are given."""
        x = _tensor(query)
        key, value = self._check_inputs(x, key, value)
        mask = self._scores_mask(mask, x.shape, key.shape[1], x.dtype)
        ### BEGIN SOLUTION
        q = self._split_heads(self.q_proj(x))  # (B, H, T_q, D)
        k = self._split_heads(self.k_proj(key))  # (B, H, T_k, D)
        v = self._split_heads(self.v_proj(value))  # (B, H, T_k, D)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, D)
        ### END SOLUTION
        self.last_attention = weights.data if self.keep_attention else None
        return self._merge_heads(out)

    def _check_inputs(self, x: Tensor, key, value) -> tuple[Tensor, Tensor]:
        """The key and value Tensors (both x for self-attention), with their shapes checked."""
        self._check_input("query", x)
        if key is None and value is not None:
            raise ValueError("MultiHeadAttention: value was given without key; pass key= too")
        if key is None:
            return x, x
        key = _tensor(key)
        value = key if value is None else _tensor(value)
        self._check_input("key", key)
        self._check_input("value", value)
        if key.shape[:2] != value.shape[:2] or key.shape[0] != x.shape[0]:
            raise ShapeError(
                f"MultiHeadAttention: query {x.shape}, key {key.shape} and value "
                f"{value.shape} need the same batch size, and key and value the same length"
            )
        return key, value

    def _scores_mask(self, mask, q_shape, k_len, dtype):
        hint = "; key and value are keyword-only: attn(x, key=memory, value=memory)"
        scores_shape = (q_shape[0], self.num_heads, q_shape[1], k_len)
        return _mask_array(mask, scores_shape, dtype, hint)

    def __repr__(self):
        return f"MultiHeadAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads})"


# %% [markdown]
# ## Seeing attention
#
# `plot_attention(weights, tokens, path)` draws the weights as heatmaps with the tokens on the
# axes: rows are queries, columns keys. `weights` may be `(T_q, T_k)`, `(H, T_q, T_k)` or
# `last_attention`'s `(B, H, T_q, T_k)` (pick the row with `batch=`). All heads are drawn side by
# side unless `head=` picks one. For cross-attention give the key tokens as `key_tokens`.


# %% nbgrader={"grade": false, "grade_id": "plot", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def plot_attention(
    weights,
    tokens,
    path,
    *,
    key_tokens=None,
    head: int | None = None,
    batch: int = 0,
    title: str = "Attention",
) -> Path:
    """Write attention weights as labelled heatmaps (one per head) to a PNG; returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    values = np.asarray(weights.data if isinstance(weights, Tensor) else weights, np.float64)
    if values.ndim == 4:
        values = values[batch]
    if values.ndim == 2:
        values = values[None]
    if values.ndim != 3:
        raise ShapeError(
            "plot_attention needs weights of shape (T_q, T_k), (H, T_q, T_k) or "
            f"(B, H, T_q, T_k), got {np.shape(weights)}"
        )
    if head is not None:
        values = values[head : head + 1]
    queries = [str(t) for t in tokens]
    keys = queries if key_tokens is None else [str(t) for t in key_tokens]
    if (len(queries), len(keys)) != values.shape[1:]:
        raise ShapeError(
            f"plot_attention: {len(queries)} query and {len(keys)} key labels for weights of "
            f"shape {values.shape[1:]}; pass one label per position (key_tokens for cross-attention)"
        )
    count = values.shape[0]
    side = max(3.0, 0.35 * max(len(queries), len(keys)))
    fig = Figure(figsize=(side * count + 1, side + 0.8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, count, squeeze=False)[0]
    for index, (ax, grid) in enumerate(zip(axes, values)):
        image = ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=8)
        ax.set_yticks(range(len(queries)), queries, fontsize=8)
        number = index if head is None else head
        ax.set_title(f"head {number}", fontsize=9)
    fig.colorbar(image, ax=list(axes), fraction=0.03)
    fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path


# %% [markdown]
# ## Try it

# %%
np.random.seed(0)
attn = MultiHeadAttention(embed_dim=16, num_heads=4)
y = attn(Tensor(np.random.randn(2, 5, 16)), causal_mask(5))
print(y.shape, attn.last_attention.shape, attn.last_attention[0, 0].round(2)[1])

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


def leaves(rng, *shapes) -> list[Tensor]:
    return [Tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]


def backward_with(out: Tensor, rng) -> None:
    """Backpropagate a random gradient from `out`."""
    (out * Tensor(rng.standard_normal(out.shape))).sum().backward()


# %% nbgrader={"grade": true, "grade_id": "test-core", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades=("masks", "sdpa"))
def test_core_against_a_direct_softmax(rng):
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    out, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(3) + np.triu(np.full((4, 4), -np.inf), 1)
    expect = np.exp(scores - scores.max(-1, keepdims=True))
    expect /= expect.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights.data, expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.data, expect @ v, rtol=1e-5, atol=1e-5)
    q, k, v = leaves(rng, (2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 2))  # (B, H, T, D), longer keys
    out, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(5, past_len=1))
    backward_with(out, rng)
    plain, _ = scaled_dot_product_attention(*(Tensor(t.data) for t in (q, k, v)))
    return {"out": out.data, "weights": weights.data, "dq": q.grad, "dk": k.grad, "dv": v.grad,
            "unmasked": plain.data}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-masked-row", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades=("masks", "sdpa"))
def test_fully_masked_row_is_zero_not_nan(rng):
    q = Tensor(np.ones((1, 3, 2)), requires_grad=True)
    out, weights = scaled_dot_product_attention(
        q, np.ones((1, 2, 2)), np.ones((1, 2, 2)), mask=padding_mask([0], 2)[0]
    )
    assert not np.isnan(out.data).any() and np.all(weights.data == 0) and np.all(out.data == 0)
    out.sum().backward()
    assert np.all(q.grad == 0)
    lengths = [0, int(rng.integers(1, 5)), 5]  # one sequence is all padding
    q, k, v = leaves(rng, (3, 1, 4, 3), (3, 1, 5, 3), (3, 1, 5, 3))  # (B, H, T, D)
    out, weights = scaled_dot_product_attention(q, k, v, mask=padding_mask(lengths, 5))
    backward_with(out, rng)
    assert np.all(np.isfinite(q.grad)) and np.all(out.data[0] == 0)
    return {"out": out.data, "weights": weights.data, "dq": q.grad, "dk": k.grad, "dv": v.grad}


# %% nbgrader={"grade": true, "grade_id": "test-mha", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-6, grades="mha")
def test_mha_shapes_and_causality(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    attn = MultiHeadAttention(8, 2)
    x = rng.standard_normal((1, 5, 8))
    first = attn(Tensor(x), causal_mask(5)).data
    x[0, 3:] += 1.0  # change the future of position 2
    second = attn(Tensor(x), causal_mask(5)).data
    np.testing.assert_allclose(first[0, :3], second[0, :3], atol=1e-6)
    assert not np.allclose(first[0, 3:], second[0, 3:])
    assert attn.last_attention.shape == (1, 2, 5, 5)
    (x,) = leaves(rng, (2, 5, 8))
    out = attn(x, causal_mask(5))
    backward_with(out, rng)
    memory = Tensor(rng.standard_normal((2, 3, 8)))
    cross = attn(Tensor(x.data), key=memory, value=memory).data  # queries from x, keys elsewhere
    grads = np.concatenate([p.grad.ravel() for p in attn.parameters()])
    return {"first": first, "out": out.data, "dx": x.grad, "dparams": grads, "cross": cross}
