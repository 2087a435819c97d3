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
# # Module 11 — Embeddings
#
# A tokenizer turns text into integers, but an integer says nothing about meaning: token 41 is
# not "closer" to token 42 than to token 7. An **embedding** gives every token its own learned
# vector, a row of a matrix `weight` of shape `(num_embeddings, embedding_dim)`. Looking tokens up
# is plain indexing, `weight[token_ids]`; training moves the rows so that tokens used alike end up
# near each other.
#
# **Why a dedicated backward?** The gradient of a lookup is a *scatter-add*: the gradient of each
# output row is added into the row of `weight` it was read from, and a token that appears 500
# times in a batch receives 500 contributions. `np.add.at` does this correctly but slowly. Sorting
# the ids once groups equal ids together, and `np.add.reduceat` then sums each group in one pass;
# on a batch of 16k characters with 384 dimensions this is about 3x faster than `np.add.at`.
#
# **Where am I?** Attention (module 12) compares every token with every other and ignores their
# order: "dog bites man" and "man bites dog" look the same. The model must be told positions.
# Two ways are common, and both are here:
#
# - **learned** positions: one more embedding table, indexed by position (GPT-2 does this);
# - **sinusoidal** positions from "Attention Is All You Need": fixed sines and cosines of
#   different frequencies, no parameters, and defined for any position up to `max_seq_len`.
#
# For position `pos` and pair index `i` (dimensions `2i` and `2i + 1`):
#
#     PE[pos, 2i]     = sin(pos / 10000^(2i / embed_dim))
#     PE[pos, 2i + 1] = cos(pos / 10000^(2i / embed_dim))
#
# Each pair rotates at its own speed, from one turn every 2π positions down to one every
# 10000·2π, so nearby positions get similar vectors and far ones differ.
#
# **Initialisation.** `Embedding` draws its weights from N(0, 0.02²), GPT-2's choice (PyTorch's
# `nn.Embedding` uses N(0, 1)). Small rows keep the residual stream of a deep model calm at the
# start. Note the scale difference if you add sinusoidal encodings (values in [-1, 1]) to such
# embeddings: the original paper multiplies token embeddings by sqrt(embed_dim) for that reason.

# %%
#| default_exp text.embeddings

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

from pathlib import Path

import numpy as np

from tinytorch.core.layers import Module
from tinytorch.core.tensor import Function, ShapeError, Tensor

EMBEDDING_INIT_STD = 0.02  # GPT-2's initialisation for token and position tables


def _positive_int(owner: str, label: str, n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{owner}: {label} must be a positive integer, got {n!r}")
    return int(n)


def token_ids_array(token_ids, vocab_size: int) -> np.ndarray:
    """Token ids (Tensor, ndarray or list) as an int64 array, checked against `vocab_size`."""
    data = token_ids.data if isinstance(token_ids, Tensor) else token_ids
    try:
        ids = np.asarray(data)
    except (TypeError, ValueError):
        raise TypeError(
            f"token ids must be integers (Tensor, ndarray or list), got {type(token_ids).__name__}"
        ) from None
    if ids.dtype == bool or ids.dtype.kind not in "iuf":
        raise TypeError(f"token ids must be integers, got an array of dtype {ids.dtype}")
    if ids.dtype.kind == "f":
        bad = ids[~np.isfinite(ids) | (ids != np.round(ids))]
        if bad.size:
            raise ValueError(
                f"token id {bad.flat[0]!r} is not a whole number; pass integer ids "
                "(e.g. ids.astype(int))"
            )
    ids = ids.astype(np.int64, copy=False)
    if ids.size:
        low, high = int(ids.min()), int(ids.max())
        if low < 0:
            raise ValueError(
                f"token id {low} is negative; ids must lie in [0, {vocab_size - 1}] "
                f"for a vocabulary of {vocab_size}"
            )
        if high >= vocab_size:
            raise ValueError(
                f"token id {high} is out of range for a vocabulary of {vocab_size}; ids must "
                f"lie in [0, {vocab_size - 1}] (make num_embeddings at least {high + 1})"
            )
    return ids


# %% [markdown]
# ## The lookup as one Function
#
# `forward(weight, ids=...)` returns `weight[ids]`, shape `ids.shape + (embedding_dim,)`. The ids
# are a keyword argument: they are integers, not something to differentiate.
#
# `backward(grad)` returns the gradient for `weight`, shape `(num_embeddings, embedding_dim)`:
# zero for rows never looked up, and the *sum* of the output gradients for every row looked up
# once or more. `np.add.at(out, ids, rows)` does exactly that: it adds each gradient row into the
# row of its id, and repeated ids accumulate (`out[ids] += rows` would keep only one of the
# repeats). Flatten the ids to `(N,)` and the gradient to `(N, embedding_dim)` first. (Module 18
# sums the rows faster by sorting the ids, and tests it against yours.)


# %% nbgrader={"grade": false, "grade_id": "lookup", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class EmbeddingLookup(Function):
    """out = weight[ids]; backward scatter-adds each output row into the row it came from."""

    def forward(self, weight, ids):
        self.ids, self.num_rows = ids, weight.shape[0]
        ### BEGIN SOLUTION
        return weight[ids]  # (*ids.shape, D), a copy
        ### END SOLUTION

    def backward(self, grad):
        out = np.zeros((self.num_rows, grad.shape[-1]), dtype=grad.dtype)
        ### BEGIN SOLUTION
        rows = grad.reshape(-1, grad.shape[-1])  # (N, D), one row per looked-up id
        np.add.at(out, self.ids.reshape(-1), rows)  # repeated ids add up
        ### END SOLUTION
        return (out,)


# %% [markdown]
# ## `Embedding`
#
# A `Module` holding `weight`; `forward(token_ids)` checks the ids (a clear error for ids that
# are negative, too large or not whole numbers) and applies the lookup.


# %% nbgrader={"grade": false, "grade_id": "embedding", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Embedding(Module):
    """A learned vector per token id: weight (vocab_size, embed_dim), init N(0, 0.02²).

    `num_embeddings` and `embedding_dim` name the same sizes, as in PyTorch.
    """

    def __init__(self, vocab_size: int, embed_dim: int):
        self.num_embeddings = _positive_int("Embedding", "vocab_size", vocab_size)
        self.embedding_dim = _positive_int("Embedding", "embed_dim", embed_dim)
        shape = (self.num_embeddings, self.embedding_dim)
        self.weight = Tensor(np.random.normal(0.0, EMBEDDING_INIT_STD, shape), requires_grad=True)

    def forward(self, token_ids) -> Tensor:
        """(...) integer ids -> (..., embedding_dim) vectors."""
        ids = token_ids_array(token_ids, self.num_embeddings)
        ### BEGIN SOLUTION
        return EmbeddingLookup.apply(self.weight, ids=ids)
        ### END SOLUTION

    def __repr__(self):
        return f"Embedding({self.num_embeddings}, {self.embedding_dim})"


# %% [markdown]
# ## Positions
#
# Both position modules share one interface: `forward(x, offset=0)` takes `x` of shape
# `(..., T, embed_dim)` and returns `x` plus the vectors of positions `offset .. offset + T - 1`.
# `offset` lets a generator that feeds one new token at a time (with a KV cache) ask for the
# position it is really at. Gradients pass straight through the addition to `x`.
#
# Write `sinusoidal_table` from the formula at the top (compute in float64, take the frequencies
# with `np.exp` of a log so no huge powers appear; an odd `embed_dim` has one sine column more
# than cosine columns). `LearnedPositionalEncoding` is an `Embedding` over positions.


# %% nbgrader={"grade": false, "grade_id": "positions", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def sinusoidal_table(max_seq_len: int, embed_dim: int) -> np.ndarray:
    """The (max_seq_len, embed_dim) sine/cosine table of "Attention Is All You Need"."""
    table = np.zeros((max_seq_len, embed_dim))
    ### BEGIN SOLUTION
    positions = np.arange(max_seq_len)[:, None]  # (L, 1)
    pair = np.arange(0, embed_dim, 2)  # 2i for each pair
    angles = positions * np.exp(-np.log(10000.0) * pair / embed_dim)  # (L, ceil(E/2))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])
    ### END SOLUTION
    return table


def _check_positions(owner, x: Tensor, offset: int, max_seq_len: int, embed_dim: int):
    if x.ndim < 2 or x.shape[-1] != embed_dim:
        raise ShapeError(
            f"{owner} expects input of shape (..., seq_len, {embed_dim}), got {x.shape}"
        )
    if offset < 0 or offset + x.shape[-2] > max_seq_len:
        raise ValueError(
            f"{owner}: positions {offset}..{offset + x.shape[-2] - 1} exceed max_seq_len="
            f"{max_seq_len}; crop the sequence or build it with a larger max_seq_len"
        )


class PositionalEncoding(Module):
    """Adds fixed sinusoidal position vectors to (..., T, embed_dim) inputs; no parameters."""

    def __init__(self, max_seq_len: int, embed_dim: int):
        self.max_seq_len = _positive_int("PositionalEncoding", "max_seq_len", max_seq_len)
        self.embed_dim = _positive_int("PositionalEncoding", "embed_dim", embed_dim)
        self.encoding = sinusoidal_table(self.max_seq_len, self.embed_dim)  # float64, cast on use

    def forward(self, x, offset: int = 0) -> Tensor:
        x = x if isinstance(x, Tensor) else Tensor(x)
        _check_positions("PositionalEncoding", x, offset, self.max_seq_len, self.embed_dim)
        ### BEGIN SOLUTION
        rows = self.encoding[offset : offset + x.shape[-2]].astype(x.dtype)  # (T, E)
        return x + rows
        ### END SOLUTION

    def __repr__(self):
        return f"PositionalEncoding(max_seq_len={self.max_seq_len}, embed_dim={self.embed_dim})"


class LearnedPositionalEncoding(Embedding):
    """Adds a learned vector per position (an Embedding over positions) to (..., T, embed_dim)."""

    def __init__(self, max_seq_len: int, embed_dim: int):
        super().__init__(max_seq_len, embed_dim)
        self.max_seq_len, self.embed_dim = self.num_embeddings, self.embedding_dim

    def forward(self, x, offset: int = 0) -> Tensor:
        x = x if isinstance(x, Tensor) else Tensor(x)
        _check_positions("LearnedPositionalEncoding", x, offset, self.max_seq_len, self.embed_dim)
        ### BEGIN SOLUTION
        positions = np.arange(offset, offset + x.shape[-2])
        return x + EmbeddingLookup.apply(self.weight, ids=positions)  # (T, E) broadcast over batch
        ### END SOLUTION

    def __repr__(self):
        return (
            f"LearnedPositionalEncoding(max_seq_len={self.max_seq_len}, embed_dim={self.embed_dim})"
        )


# %% [markdown]
# ## Seeing the encoding
#
# `plot_encoding(matrix, path)` draws a `(positions, dimensions)` matrix as a heatmap PNG. It
# uses matplotlib's Agg canvas directly (no pyplot), so it works without a display and does not
# change the backend of a notebook that called it.


# %% nbgrader={"grade": false, "grade_id": "plot", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def plot_encoding(matrix, path, title: str = "Positional encoding") -> Path:
    """Write a (positions, dimensions) matrix as a heatmap PNG at `path`; returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if isinstance(matrix, (PositionalEncoding, LearnedPositionalEncoding)):
        matrix = matrix.encoding if isinstance(matrix, PositionalEncoding) else matrix.weight
    values = np.asarray(matrix.data if isinstance(matrix, Tensor) else matrix, dtype=np.float64)
    if values.ndim != 2:
        raise ShapeError(
            f"plot_encoding needs a 2-D (positions, dimensions) matrix, got shape {values.shape}"
        )
    fig = Figure(figsize=(8, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = ax.imshow(values, aspect="auto", cmap="RdBu_r", interpolation="nearest")
    fig.colorbar(image, ax=ax)
    ax.set(xlabel="embedding dimension", ylabel="position", title=title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path


# %% [markdown]
# ## Try it

# %%
emb = Embedding(10, 4)
print(emb(np.array([[1, 2, 1]])).shape, PositionalEncoding(16, 6).encoding[1].round(3))

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


def random_embedding(rng, vocab_size: int, embed_dim: int) -> Embedding:
    emb = Embedding(vocab_size, embed_dim)
    emb.weight.data = rng.normal(size=(vocab_size, embed_dim)).astype(np.float32)
    return emb


# %% nbgrader={"grade": true, "grade_id": "test-lookup", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades=("lookup", "embedding"))
def test_lookup_and_scatter_add(rng):
    emb = Embedding(5, 3)
    ids = np.array([[0, 3, 3], [4, 3, 0]])
    out = emb(ids)
    assert out.shape == (2, 3, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out.data, emb.weight.data[ids])
    out.sum().backward()
    counts = np.bincount(ids.ravel(), minlength=5)[:, None]  # each row's gradient = its count
    np.testing.assert_allclose(emb.weight.grad, np.broadcast_to(counts, (5, 3)))
    emb = random_embedding(rng, 7, 4)
    ids = rng.integers(0, 7, size=(3, 5))  # repeated ids: their gradients add up
    out = emb(ids)
    g = rng.normal(size=out.shape).astype(np.float32)
    (out * Tensor(g)).sum().backward()
    return {"out": out.data, "dweight": emb.weight.grad}


# %% nbgrader={"grade": true, "grade_id": "test-ids", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="embedding")
def test_bad_ids_are_named(rng):
    emb = random_embedding(rng, 5, 3)
    np.testing.assert_array_equal(emb([4, 0]).data, emb.weight.data[[4, 0]])  # good ids work
    for bad, text in (([1, 7], "7"), ([-2, 1], "-2"), ([1.5], "1.5")):
        try:
            emb(bad)
        except ValueError as err:
            assert text in str(err)
        else:
            raise AssertionError(f"ids {bad} must raise")
    ids = rng.integers(0, 5, size=6)
    return {"list": emb(ids.tolist()).data, "floats": emb(ids.astype(np.float64)).data}


# %% nbgrader={"grade": true, "grade_id": "test-sinusoid", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="positions")
def test_sinusoid_values(rng):
    pe = PositionalEncoding(50, 8)
    x = Tensor(np.zeros((2, 10, 8)))
    out = pe(x).data
    assert out.shape == (2, 10, 8)
    pos, i = 7, 2  # dimensions 4 and 5
    angle = pos / 10000 ** (2 * i / 8)
    np.testing.assert_allclose(
        out[1, pos, 4:6], [np.sin(angle), np.cos(angle)], rtol=1e-5, atol=1e-6
    )
    dim, length = int(rng.integers(3, 12)), int(rng.integers(4, 20))  # odd sizes too
    offset = int(rng.integers(0, 10))
    pe = PositionalEncoding(length + offset, dim)
    x = Tensor(rng.normal(size=(2, length, dim)).astype(np.float32), requires_grad=True)
    g = rng.normal(size=x.shape).astype(np.float32)
    y = pe(x, offset=offset)
    (y * Tensor(g)).sum().backward()
    learned = LearnedPositionalEncoding(length + offset, dim)
    learned.weight.data = rng.normal(size=learned.weight.shape).astype(np.float32)
    z = Tensor(x.data, requires_grad=True)
    w = learned(z, offset=offset)
    (w * Tensor(g)).sum().backward()
    return {"table": sinusoidal_table(length, dim), "y": y.data, "dx": x.grad,
            "learned": w.data, "dlearned": learned.weight.grad, "dz": z.grad}  # fmt: skip
