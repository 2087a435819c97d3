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
# # Module 13 — Transformers: a complete GPT
#
# You have tensors, autograd, layers, embeddings and multi-head attention. This module assembles
# them into the decoder-only transformer behind GPT-2 and its successors, then makes it write.
#
# ```
# tokens (B, T) -> token embedding + position embedding        (B, T, C)
#               -> N x TransformerBlock (causal self-attention)  (B, T, C)
#               -> final LayerNorm -> lm_head                    (B, T, vocab)
# ```
#
# You build four pieces, each a few lines once the idea is clear:
#
# 1. **LayerNorm**: normalise every position's feature vector to mean 0 and variance 1, then
#    rescale with learnable `gamma` and `beta`. One fused `Function`, forward and backward together.
# 2. **MLP**: `Linear(C, 4C) -> GELU -> Linear(4C, C)`, applied to every position on its own.
# 3. **TransformerBlock**: `x = x + attention(ln1(x))`, then `x = x + mlp(ln2(x))`. The `x + ...`
#    paths carry the gradient straight down a deep stack; the norms keep each sub-layer's input tame.
# 4. **GPT**: embeddings, a list of blocks, a final norm, a vocabulary projection, a causal mask,
#    and `generate()`, which samples one token at a time and feeds it back in.
#
# The rest of the file (config presets, weight initialisation, a key/value cache, saving, the
# PyTorch name mapping and the Hugging Face GPT-2 export, parameter and memory arithmetic) is given:
# read it, it is what makes the model practical.

# %%
#| default_exp models.transformer

# %% [markdown]
# The imports of the model files come first: the GPT's, then those of the encoder-decoder models
# of section 9 (`tinytorch/models/seq2seq.py`). `LayerNorm`, `MLP` and the model classes are
# written in this notebook below and exported to their own package files; the package files
# import them from there, but the notebook (where `__name__` is `"__main__"`) skips those imports
# and always runs your code.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from tinytorch.core.attention import KVCache, MultiHeadAttention, causal_mask, check_heads
from tinytorch.core.autograd import no_grad
from tinytorch.core.embeddings import Embedding, PositionalEncoding
from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.text.embeddings import token_ids_array

if __name__ != "__main__":  # the package file; this notebook defines both below
    from tinytorch.nn.feedforward import MLP
    from tinytorch.nn.normalization import LayerNorm

# %% nbgrader={"grade": false, "grade_id": "seq2seq-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export models.seq2seq
"""Encoder-only and encoder-decoder transformers, built from the GPT's parts (section 9)."""

import numpy as np

from tinytorch.core.attention import KVCache, MultiHeadAttention, causal_mask
from tinytorch.core.autograd import no_grad
from tinytorch.core.embeddings import Embedding
from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import ShapeError

if __name__ != "__main__":  # the package file; this notebook defines these names below
    from tinytorch.models.transformer import (
        TransformerBlock,
        _cached_generation,
        _check_generate_args,
        init_gpt2_weights,
        sample_next,
        token_ids_2d,
    )
    from tinytorch.nn.feedforward import MLP
    from tinytorch.nn.normalization import LayerNorm

# %% nbgrader={"grade": false, "grade_id": "reexport", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export core.transformer
"""The transformer family under its course path: `from tinytorch.core.transformer import GPT`."""

if __name__ != "__main__":  # the package file only: in this notebook the names are defined below
    from tinytorch.models.seq2seq import (  # noqa: F401
        DecoderBlock,
        Seq2SeqTransformer,
        TransformerEncoder,
    )
    from tinytorch.models.transformer import (  # noqa: F401
        GPT,
        PRESETS,
        GPTConfig,
        TransformerBlock,
        count_parameters,
        estimate_memory,
        estimate_parameters,
        load_model,
        load_torch_state_dict,
        save_model,
        to_torch_state_dict,
    )
    from tinytorch.nn.feedforward import MLP  # noqa: F401
    from tinytorch.nn.normalization import LayerNorm  # noqa: F401

__all__ = ["GPT", "GPTConfig", "PRESETS", "TransformerBlock", "LayerNorm", "MLP",
           "DecoderBlock", "TransformerEncoder", "Seq2SeqTransformer",
           "count_parameters", "estimate_parameters", "estimate_memory", "save_model",
           "load_model", "to_torch_state_dict", "load_torch_state_dict"]  # fmt: skip

# %% [markdown]
# ## 1. LayerNorm
#
# For each position, over its `C` features:
#
# $$\hat x = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad y = \gamma \odot \hat x + \beta$$
#
# Unlike batch norm, the statistics come from one sample only, so a batch of one behaves exactly
# like a batch of a thousand, and training and inference compute the same thing.
#
# **Why one fused `Function`?** Written with tensor operators, layer norm records about ten graph
# nodes and keeps each intermediate alive for backward. Fused, it keeps two arrays (`x_hat` and the
# reciprocal standard deviation) and its backward is one formula. With `g = dy * gamma` and means
# taken over the feature axis:
#
# $$\frac{\partial L}{\partial x} = \frac{1}{\sigma}\Big(g - \overline{g} - \hat x\,\overline{g\hat x}\Big),
# \qquad \frac{\partial L}{\partial \gamma} = \sum dy\,\hat x, \qquad \frac{\partial L}{\partial \beta} = \sum dy$$
#
# where the sums for `gamma` and `beta` run over every leading axis (batch and sequence).
# Return those two already reduced to shape `(C,)`: the engine accepts a gradient that already has
# the input's shape.
#
# Two reductions are given: `mean_last(a)` is `a.mean(axis=-1, keepdims=True)` and
# `sum_leading(a)` sums over every axis but the last. They compute the same numbers as numpy's
# `mean` and `sum`, as matrix-vector products: numpy's reductions are slow over many short rows
# (a thousand rows of 128 features), a matrix-vector product is not.

# %%
#| export nn.normalization
import numpy as np

from tinytorch.core.layers import Module
from tinytorch.core.tensor import Function, ShapeError, Tensor


def mean_last(a: np.ndarray) -> np.ndarray:
    """Mean over the last axis, kept as a length-1 axis: (..., C) -> (..., 1)."""
    n = a.shape[-1]
    return (a @ np.full(n, 1.0 / n, dtype=a.dtype))[..., None]


def sum_leading(a: np.ndarray) -> np.ndarray:
    """Sum over every axis but the last: (..., C) -> (C,)."""
    rows = a.reshape(-1, a.shape[-1])
    return np.ones(len(rows), dtype=a.dtype) @ rows


# %% nbgrader={"grade": false, "grade_id": "layernorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.normalization
class LayerNormFunction(Function):
    """Fused layer norm over the last axis: y = gamma * (x - mean) / sqrt(var + eps) + beta."""

    def forward(self, x, gamma, beta, eps=1e-5):
        ### BEGIN SOLUTION
        centred = x - mean_last(x)  # (..., C)
        var = mean_last(centred * centred)  # (..., 1)
        self.rstd = 1.0 / np.sqrt(var + eps)  # (..., 1)
        self.x_hat, self.gamma = centred * self.rstd, gamma
        return self.x_hat * gamma + beta
        ### END SOLUTION

    def backward(self, grad):
        x_hat = self.x_hat
        gx = ggamma = gbeta = None
        ### BEGIN SOLUTION
        if self.needs_grad[0]:
            g = grad * self.gamma  # gradient with respect to x_hat
            gx = (g - mean_last(g) - x_hat * mean_last(g * x_hat)) * self.rstd
        if self.needs_grad[1]:
            ggamma = sum_leading(grad * x_hat)
        if self.needs_grad[2]:
            gbeta = sum_leading(grad)
        ### END SOLUTION
        return gx, ggamma, gbeta


class LayerNorm(Module):
    """Layer normalisation over the last axis with learnable scale `gamma` and shift `beta`.

    Each position is normalised on its own (batch-independent), so training and inference agree.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5):
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        if len(tuple(shape)) != 1:
            raise ValueError(
                f"LayerNorm normalises the last axis only; give its size as an int, got {shape}"
            )
        self.normalized_shape = int(tuple(shape)[0])
        self.gamma = Tensor(
            np.ones(self.normalized_shape), requires_grad=True
        )  # scale, starts at 1
        self.beta = Tensor(
            np.zeros(self.normalized_shape), requires_grad=True
        )  # shift, starts at 0
        self.eps = eps  # keeps the division finite for a constant input

    def forward(self, x):
        x = x if isinstance(x, Tensor) else Tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.normalized_shape:
            raise ShapeError(
                f"LayerNorm({self.normalized_shape}) got input of shape {x.shape}; its last axis "
                f"must have {self.normalized_shape} features"
            )
        ### BEGIN SOLUTION
        return LayerNormFunction.apply(x, self.gamma, self.beta, eps=self.eps)
        ### END SOLUTION


# %% [markdown]
# ## 2. MLP (the position-wise feed-forward network)
#
# Attention mixes information *between* positions; the MLP then transforms each position on its
# own. It widens to `hidden_dim` (4x by default), applies GELU, and projects back. Two thirds of a
# block's parameters live here: `2 * C * 4C = 8C²` against attention's `4C²`.

# %%
#| export nn.feedforward
from tinytorch.core.activations import GELU
from tinytorch.core.layers import Linear, Module


# %% nbgrader={"grade": false, "grade_id": "mlp", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.feedforward
class MLP(Module):
    """Position-wise feed-forward network: Linear(C, hidden) -> GELU -> Linear(hidden, C)."""

    def __init__(self, embed_dim: int, hidden_dim: int | None = None):
        hidden_dim = 4 * embed_dim if hidden_dim is None else hidden_dim  # the usual 4x expansion
        self.linear1 = Linear(embed_dim, hidden_dim)  # expand
        self.gelu = GELU()
        self.linear2 = Linear(hidden_dim, embed_dim)  # contract

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.linear2(self.gelu(self.linear1(x)))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)
        ### END SOLUTION


# %% [markdown]
# ## 3. The transformer block
#
# Pre-norm (GPT-2 and nearly every model since) normalises the *input* of each sub-layer and adds
# the result to an untouched residual stream:
#
# ```
# x = x + attention(ln1(x))        x = ln1(x + attention(x))
# x = x + mlp(ln2(x))              x = ln2(x + mlp(x))
#        pre-norm                         post-norm (the 2017 paper)
# ```
#
# In pre-norm the gradient reaches the bottom of the stack through the additions alone, which is
# why deep pre-norm stacks train without warm-up tricks. Post-norm pushes every gradient through a
# normalisation per layer; `norm_first=False` builds it so you can compare.
#
# Write `forward` for both variants. Pass the mask (and the cache, used during generation) to the
# attention by keyword.


# %% nbgrader={"grade": false, "grade_id": "block", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class TransformerBlock(Module):
    """Self-attention and an MLP, each wrapped in a residual connection with a LayerNorm.

    `norm_first=True` (default) is pre-norm as in GPT-2; `False` is the original post-norm.
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: float = 4, norm_first=True):
        self.attention = MultiHeadAttention(embed_dim, num_heads)  # checks the head count
        self.ln1 = LayerNorm(embed_dim)
        self.mlp = MLP(embed_dim, hidden_dim=int(embed_dim * mlp_ratio))
        self.ln2 = LayerNorm(embed_dim)
        self.norm_first = norm_first

    def forward(self, x, mask=None, cache=None):
        """(B, T, C) -> (B, T, C). `mask` is additive; `cache` is this block's KVCache."""
        ### BEGIN SOLUTION
        if self.norm_first:
            x = x + self.attention(self.ln1(x), mask, cache=cache)  # (B, T, C)
            x = x + self.mlp(self.ln2(x))
        else:
            x = self.ln1(x + self.attention(x, mask, cache=cache))
            x = self.ln2(x + self.mlp(x))
        ### END SOLUTION
        return x


# %% [markdown]
# ## 4. Configuration and presets
#
# A model is described by a handful of numbers. Keeping them in one small dataclass lets a preset
# table name real sizes, and lets a checkpoint store the shape of the model beside its weights.


# %% nbgrader={"grade": false, "grade_id": "config", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
@dataclass
class GPTConfig:
    vocab_size: int
    embed_dim: int
    num_layers: int
    num_heads: int
    max_seq_len: int = 1024  # learned positions exist only up to here
    mlp_ratio: float = 4  # MLP hidden width = mlp_ratio * embed_dim
    norm_first: bool = True  # pre-norm (GPT-2); False = post-norm (2017 paper)
    tie_weights: bool = False  # lm_head reuses token_embedding.weight (GPT-2 does this)
    position: str = "learned"  # learned vectors (GPT-2) or "sinusoidal" (2017 paper, no weights)


# The one table of model sizes: the milestones, the benchmark and the tests take theirs from here.
# The character-level sizes have vocab_size 65 as a placeholder; a run sets its corpus's own.
PRESETS: dict[str, GPTConfig] = {
    "nano": GPTConfig(
        vocab_size=65, embed_dim=32, num_layers=2, num_heads=2, max_seq_len=16, tie_weights=True
    ),
    "tiny": GPTConfig(
        vocab_size=65, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=64, tie_weights=True
    ),
    "small": GPTConfig(
        vocab_size=65, embed_dim=128, num_layers=4, num_heads=4, max_seq_len=64, tie_weights=True
    ),
    "medium": GPTConfig(
        vocab_size=65, embed_dim=256, num_layers=6, num_heads=8, max_seq_len=128, tie_weights=True
    ),
    "gpt2-small": GPTConfig(50257, 768, 12, 12, max_seq_len=1024, tie_weights=True),
    "gpt2-medium": GPTConfig(50257, 1024, 24, 16, max_seq_len=1024, tie_weights=True),
    "gpt2-large": GPTConfig(50257, 1280, 36, 20, max_seq_len=1024, tie_weights=True),
    "gpt3": GPTConfig(50257, 12288, 96, 96, max_seq_len=2048, tie_weights=True),
}


def init_gpt2_weights(model: Module, num_layers: int, std: float = 0.02) -> None:
    """GPT-2 initialisation, the one place weights are set.

    Linear and embedding weights ~ N(0, std); biases 0; LayerNorm gamma 1, beta 0. The projections
    that write into the residual stream (attention out_proj, mlp linear2) get std / sqrt(2 * L):
    each block adds two of them, so the stream's variance stays O(1) however deep the stack.
    """
    residual_std = std / np.sqrt(2 * num_layers)
    rng = np.random.default_rng(np.random.randint(2**31))  # seeded by np.random.seed, but faster
    for name, p in model.named_parameters():
        if name.endswith((".gamma", ".beta")):
            continue
        if name.endswith(".bias"):
            p.data[...] = 0
            continue
        rng.standard_normal(out=p.data, dtype=p.dtype)  # fills in place, no float64 copy
        p.data *= residual_std if name.endswith(("out_proj.weight", "linear2.weight")) else std


# %% [markdown]
# ## 5. Sampling the next token
#
# Generation repeats one step: run the model, keep the logits of the last position, turn them into
# a distribution, draw a token, append it, go again. This cell is the "draw" part.
#
# - **temperature** divides the logits: below 1 sharpens the distribution, above 1 flattens it.
#   Temperature 0 means greedy (argmax), which makes the output deterministic.
# - **top-k** sets every logit below the k-th largest to -inf first, so rare junk is never drawn.
# - **every row** of the batch draws its own token from its own distribution. The inverse CDF
#   does all rows at once: one uniform number per row; the token is the first index where the
#   row's cumulative probability passes it.


# %% nbgrader={"grade": false, "grade_id": "sample", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def sample_next(logits: np.ndarray, temperature: float, top_k: int | None, rng) -> np.ndarray:
    """One token id per row of `logits` (B, V): greedy at temperature 0, else sampled."""
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(axis=-1)
    logits = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = np.partition(logits, -top_k, axis=-1)[:, -top_k, None]  # (B, 1)
        logits = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))  # unnormalised, (B, V)
    cdf = np.cumsum(probs, axis=-1)
    draws = rng.random((len(logits), 1)) * cdf[:, -1:]  # one uniform per row, scaled to the total
    return np.minimum((cdf <= draws).sum(axis=-1), logits.shape[-1] - 1)
    ### END SOLUTION


def _check_generate_args(max_new_tokens, temperature, top_k, vocab_size, stop_token) -> None:
    if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not np.isfinite(temperature) or temperature < 0:
        raise ValueError(
            f"temperature must be >= 0 (0 = greedy, 1 = the model's own distribution), "
            f"got {temperature}"
        )
    if top_k is not None and (not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
    if stop_token is not None and not 0 <= stop_token < vocab_size:
        raise ValueError(
            f"stop_token must be a token id in [0, {vocab_size - 1}], got {stop_token}"
        )


def _cached_generation(use_cache):
    """Module 17's `tinytorch.memo.generation`, or None: recompute every step.

    `use_cache=None` (the default of `generate`) caches when module 17 is in the package, True
    insists on it, False never caches. The tokens are the same either way (module 17 tests it).
    """
    if use_cache is not None and not use_cache:
        return None
    try:
        import tinytorch.memo.generation as generation
    except ModuleNotFoundError as err:
        if err.name != "tinytorch.memo.generation" or use_cache:
            raise ModuleNotFoundError(
                "use_cache=True needs the KV cache of module 17 (memoization): tito module "
                "complete 17 (or tito module export 17), or pass use_cache=False",
                name=err.name,
            ) from None
        return None
    return generation


# %% [markdown]
# ### Keeping a sample from looping
#
# A small model's likeliest continuation is often a phrase it has just written, so greedy text,
# and sampling at a low temperature, falls into a loop ("the the the", or one sentence again and
# again). Two changes to the logits before the draw keep it moving:
#
# - **repetition penalty** (as in the CTRL paper): every token already in the context window is
#   made less likely: a positive logit is divided by the penalty, a negative one multiplied by it.
#   1 is off, 1.1 to 1.3 is usual. It applies at temperature 0 as well, so greedy text varies too.
# - **top-p** (nucleus sampling): keep the smallest set of likeliest tokens whose probabilities, at
#   this temperature, add up to at least p; drop the rest. Unlike top-k the set is wide where the
#   model is unsure and narrow where it is sure. With top-k as well, a token must pass both.
#
# `steer_logits` does both for every row at once; `generate` calls it just before `sample_next`.


# %% nbgrader={"grade": false, "grade_id": "steer", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def steer_logits(logits: np.ndarray, context: np.ndarray, temperature: float, top_p=None,
                 repetition_penalty: float = 1.0) -> np.ndarray:  # fmt: skip
    """`logits` (B, V) with the tokens of `context` (B, T) penalised and those past top-p -inf."""
    if top_p is not None and not (np.isfinite(top_p) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p}")
    if not (np.isfinite(repetition_penalty) and repetition_penalty > 0):
        raise ValueError(
            f"repetition_penalty must be > 0 (1 = off, 1.2 = usual), got {repetition_penalty}"
        )
    if repetition_penalty != 1:
        seen = np.zeros(logits.shape, dtype=bool)
        np.put_along_axis(seen, np.asarray(context, dtype=np.int64), True, axis=-1)
        lowered = np.where(logits > 0, logits / repetition_penalty, logits * repetition_penalty)
        logits = np.where(seen, lowered, logits)
    if top_p is not None and top_p < 1 and temperature > 0:
        scaled = logits.astype(np.float64) / temperature
        probs = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        order = np.argsort(-probs, axis=-1, kind="stable")  # likeliest first, (B, V)
        ranked = np.take_along_axis(probs, order, axis=-1)
        keep = np.empty(logits.shape, dtype=bool)
        # a token stays if the likelier ones before it hold less than top_p
        np.put_along_axis(keep, order, np.cumsum(ranked, axis=-1) - ranked < top_p, axis=-1)
        logits = np.where(keep, logits, -np.inf)
    return logits


# %% [markdown]
# ## 6. GPT
#
# Three details matter:
#
# - **Positions.** Attention is order-blind, so each position `t` adds a learned vector
#   `position_embedding[t]` to its token vector. Positions exist only up to `max_seq_len`.
#   `position="sinusoidal"` swaps in module 11's fixed sine/cosine table, looked up by the same ids.
# - **The causal mask.** Position `i` may look at `j <= i` only. The additive mask has 0 on and below
#   the diagonal and -inf above; after softmax the blocked weights are exactly 0. With a cache of
#   `past` earlier positions, the `T` new queries see all `past` keys plus the causal part of the
#   new ones: shape `(T, past + T)`, diagonal shifted by `past`.
# - **Weight tying.** GPT-2 uses the token embedding matrix, transposed, as the output projection.
#   The gradients from both uses accumulate into the one parameter.
#
# **The KV cache.** Generating token `n+1` with a plain forward recomputes keys and values for all
# `n` earlier positions, although they have not changed. The cache keeps them per block, so each
# step runs the network on one new position. When the sequence outgrows `max_seq_len` the window
# slides: every position shifts by one, so every cached key is stale and the cache is refilled from
# the cropped window. That keeps cached generation equal to recomputation.
#
# Write `GPT.forward` (embeddings, blocks, final norm, projection) and `_create_causal_mask`,
# which hands module 12's `causal_mask(seq_len, past_len)` to the blocks as a Tensor.


# %% nbgrader={"grade": false, "grade_id": "gpt", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def token_ids_2d(tokens, vocab_size: int) -> np.ndarray:
    """Token ids (Tensor, array or nested list) checked to be (batch, seq_len) in range; int64."""
    ids = token_ids_array(tokens, vocab_size)
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise ShapeError(
            f"expected token ids of shape (batch, seq_len), got shape {ids.shape}; "
            "for a single sequence add a batch axis, e.g. tokens[None]"
        )
    return ids


class SinusoidalPositions(Module):
    """Position ids (..., T) -> module 11's fixed sine/cosine vectors (..., T, C); no weights."""

    def __init__(self, max_seq_len: int, embed_dim: int):
        self.encoding = PositionalEncoding(max_seq_len, embed_dim)

    def forward(self, positions) -> Tensor:
        return Tensor(self.encoding.encoding[np.asarray(positions)])  # current precision


POSITIONS = {"learned": Embedding, "sinusoidal": SinusoidalPositions}


class GPT(Module):
    """Decoder-only transformer language model: tokens (B, T) -> logits (B, T, vocab_size).

    Weights start from GPT-2's initialisation (`init_gpt2_weights`). With `tie_weights=False`
    (the default, as in the course's reference design) `lm_head` is its own Linear with bias;
    with `True` the output projection is the transposed token-embedding matrix and `lm_head` is None.
    `position="learned"` (default) learns one vector per position; `"sinusoidal"` adds the fixed
    sine/cosine vectors of module 11 instead, which have no weights to train.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        num_layers: int,
        num_heads: int,
        max_seq_len: int = 1024,
        mlp_ratio: float = 4,
        norm_first: bool = True,
        tie_weights: bool = False,
        position: str = "learned",
    ):
        sizes = dict(vocab_size=vocab_size, embed_dim=embed_dim, num_layers=num_layers,
                     max_seq_len=max_seq_len)  # fmt: skip
        for name, value in sizes.items():
            if not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"GPT: {name} must be a positive integer, got {value!r}")
        check_heads(embed_dim, num_heads)
        if position not in POSITIONS:
            raise ValueError(f"GPT: position must be one of {sorted(POSITIONS)}, got {position!r}")
        self.config = GPTConfig(vocab_size, embed_dim, num_layers, num_heads, max_seq_len,
                                mlp_ratio, norm_first, tie_weights, position)  # fmt: skip
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.position_embedding = POSITIONS[position](max_seq_len, embed_dim)
        self.blocks = [
            TransformerBlock(embed_dim, num_heads, mlp_ratio, norm_first) for _ in range(num_layers)
        ]
        self.ln_f = LayerNorm(embed_dim)
        self.lm_head = None if tie_weights else Linear(embed_dim, vocab_size)
        init_gpt2_weights(self, num_layers)

    @classmethod
    def from_config(cls, config: GPTConfig | str) -> GPT:
        """Build from a GPTConfig or a preset name such as "tiny" or "gpt2-small"."""
        if isinstance(config, str):
            if config not in PRESETS:
                raise ValueError(f"unknown preset {config!r}; choose one of {sorted(PRESETS)}")
            config = PRESETS[config]
        return cls(**asdict(config))

    def new_cache(self) -> list[KVCache]:
        """One empty KVCache per block, for `forward(tokens, cache=...)`."""
        return [KVCache() for _ in self.blocks]

    def forward(self, tokens, cache: list[KVCache] | None = None):
        """Logits (B, T, vocab_size). With `cache` (new_cache()), tokens continue its positions."""
        ids = token_ids_2d(tokens, self.vocab_size)
        batch, seq_len = ids.shape
        past = 0 if cache is None else len(cache[0])
        if past + seq_len > self.max_seq_len:
            raise ShapeError(
                f"sequence of {past + seq_len} positions exceeds max_seq_len={self.max_seq_len}; "
                f"crop to the last {self.max_seq_len} tokens (generate() does this for you)"
            )
        ### BEGIN SOLUTION
        positions = np.arange(past, past + seq_len)[None]  # (1, T)
        x = self.token_embedding(ids) + self.position_embedding(positions)  # (B, T, C)
        # one new query may see every key: its causal mask would be all zeros, so it gets none
        mask = None if seq_len == 1 else self._create_causal_mask(seq_len, past)  # (T, past + T)
        for i, block in enumerate(self.blocks):
            x = block(x, mask=mask, cache=None if cache is None else cache[i])
        x = self.ln_f(x)  # (B, T, C)
        if self.lm_head is None:
            return x @ self.token_embedding.weight.T  # (B, T, vocab_size), tied weights
        return self.lm_head(x)  # (B, T, vocab_size)
        ### END SOLUTION

    def _create_causal_mask(self, seq_len: int, past: int = 0) -> Tensor:
        """Additive mask (seq_len, past + seq_len): 0 where query i may see key j, -inf after."""
        ### BEGIN SOLUTION
        return Tensor(causal_mask(seq_len, past))  # module 12 builds it; one definition
        ### END SOLUTION

    def _last_logits(self, tokens: np.ndarray, cache: list[KVCache] | None) -> np.ndarray:
        """Logits (B, V) for the next position, extending `cache` while the context fits."""
        window = tokens[:, -self.max_seq_len :]  # learned positions stop at max_seq_len
        if cache is None:
            return self.forward(window).data[:, -1]
        past = len(cache[0])
        if past != tokens.shape[1] - 1 or past >= self.max_seq_len:
            cache[:] = self.new_cache()  # the window slid and every position moved: refill
            return self.forward(window, cache=cache).data[:, -1]
        return self.forward(tokens[:, -1:], cache=cache).data[:, -1]  # one new position

    @no_grad()
    def generate(self, prompt_tokens, max_new_tokens=50, temperature=1.0, top_k=None, seed=None,
                 use_cache=None, stop_token=None, top_p=None,
                 repetition_penalty=1.0) -> np.ndarray:  # fmt: skip
        """Continue every prompt row; returns int64 token ids (B, prompt_len + new).

        temperature 0 is greedy; `top_k` keeps the k likeliest tokens, `top_p` the likeliest
        holding that probability, `repetition_penalty` lowers tokens already in the context
        (`steer_logits`); `seed` makes sampling reproducible; the context is cropped to max_seq_len; `use_cache` runs module 17's KV
        cache (`cached_generate`; by default when module 17 is in the package), with the same
        tokens as recomputing; once every row has produced `stop_token` generation ends early
        (finished rows are padded with it).
        """
        memo = _cached_generation(use_cache)
        if memo is not None:
            steer = {"top_p": top_p, "repetition_penalty": repetition_penalty}
            return memo.cached_generate(
                self, prompt_tokens, max_new_tokens, temperature, top_k, seed, stop_token, **steer
            )
        _check_generate_args(max_new_tokens, temperature, top_k, self.vocab_size, stop_token)
        tokens = token_ids_2d(prompt_tokens, self.vocab_size)  # (B, T)
        rng = np.random.default_rng(seed)
        stopped = np.zeros(len(tokens), dtype=bool)
        for _ in range(max_new_tokens):
            # logits of the last position of the context, cropped to max_seq_len
            logits = self._last_logits(tokens, None)  # (B, V)
            context = tokens[:, -self.max_seq_len :]
            logits = steer_logits(logits, context, temperature, top_p, repetition_penalty)
            # temperature, optional top-k, one draw per batch row
            next_ids = sample_next(logits, temperature, top_k, rng)  # (B,)
            # rows that already produced the stop token keep repeating it
            if stop_token is not None:
                next_ids = np.where(stopped, stop_token, next_ids)
                stopped |= next_ids == stop_token
            # append, and end early once every row has stopped
            tokens = np.concatenate([tokens, next_ids[:, None]], axis=1)
            if stopped.all():
                break
        return tokens


# %% [markdown]
# ## 7. Saving, loading, and carrying weights to PyTorch
#
# Weights go into a numpy `.npz` archive with the config beside them as JSON text; loading uses
# `allow_pickle=False`, so opening a checkpoint never runs code from the file.
#
# The same model in PyTorch (`nn.Linear`, `nn.LayerNorm`, `nn.Embedding`, same attribute names)
# differs in two conventions only: `nn.Linear` stores its weight as `(out, in)` where ours is
# `(in, out)` (we compute `x @ W`), and `nn.LayerNorm` calls `gamma`/`beta` `weight`/`bias`.
# A tied PyTorch model also lists `lm_head.weight` as its own entry.


# %% nbgrader={"grade": false, "grade_id": "persistence", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def save_model(model: GPT, path) -> None:
    """Write config and weights to an .npz file (no pickle)."""
    config = np.array(json.dumps(asdict(model.config)))
    np.savez(path, __config__=config, **model.state_dict())


def load_model(path) -> GPT:
    """Rebuild a GPT saved by `save_model`."""
    with np.load(path, allow_pickle=False) as archive:
        model = GPT(**json.loads(str(archive["__config__"])))
        model.load_state_dict({k: archive[k] for k in archive.files if k != "__config__"})
    return model


def _linear_weight_ids(model: Module) -> set[int]:
    return {id(m.weight) for m in model.modules() if isinstance(m, Linear)}


def to_torch_state_dict(model: Module) -> dict[str, np.ndarray]:
    """Our weights under PyTorch's names and layouts (load with torch.from_numpy)."""
    linear, out = _linear_weight_ids(model), {}
    for name, p in model.named_parameters():
        stem, leaf = name.rsplit(".", 1)
        leaf = {"gamma": "weight", "beta": "bias"}.get(leaf, leaf)
        out[f"{stem}.{leaf}"] = np.ascontiguousarray(p.data.T if id(p) in linear else p.data)
    if getattr(model, "lm_head", False) is None:  # tied: PyTorch lists the shared matrix twice
        out["lm_head.weight"] = out["token_embedding.weight"]
    return out


def load_torch_state_dict(model: Module, state: dict) -> None:
    """Load a PyTorch-layout state dict (arrays, or tensors via .numpy()) into `model`."""
    linear, ours = _linear_weight_ids(model), {}
    for name, p in model.named_parameters():
        stem, leaf = name.rsplit(".", 1)
        key = f"{stem}.{ {'gamma': 'weight', 'beta': 'bias'}.get(leaf, leaf) }"
        if key not in state:
            raise KeyError(f"PyTorch state dict has no '{key}' (needed for '{name}')")
        value = np.asarray(state[key])
        ours[name] = value.T if id(p) in linear else value
    model.load_state_dict(ours)


# %% [markdown]
# ### Carrying a GPT to Hugging Face (given)
#
# Our pre-norm GPT with learned positions is GPT-2's architecture, so `transformers`'
# `GPT2LMHeadModel` can run it unchanged once the weights are renamed and regrouped. GPT-2's layout
# differs from ours in three ways: its attention keeps q, k and v in one fused `c_attn` matrix
# `(C, 3C)` (ours are three `(C, C)` matrices side by side along the output axis); its `Conv1D`
# layers store weights as `(in, out)`, as ours do, while its `lm_head` is an `nn.Linear`, `(out, in)`;
# and its `lm_head` has no bias. The export writes what `save_pretrained` writes, `config.json` and
# `model.safetensors`, with numpy and the `safetensors` package alone (the optional `hf` extra),
# so `GPT2LMHeadModel.from_pretrained(folder)` loads it; `load_gpt2` reads such a folder back.
# A model GPT-2 cannot express (post-norm, sinusoidal positions, a trained bias on an untied
# `lm_head`) is refused with a one-line reason instead of being exported as something else.

# %% nbgrader={"grade": false, "grade_id": "huggingface", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export models.huggingface
"""A tinytorch GPT in Hugging Face's GPT-2 layout: `GPT2LMHeadModel.from_pretrained` reads it.

`save_gpt2(model, folder, tokenizer)` writes config.json, model.safetensors and the tokenizer;
`load_gpt2(folder)` rebuilds the tinytorch GPT. Only numpy and `safetensors` are used (the `hf`
extra), and only when one of these functions is called; docs/huggingface.md is the guide.
"""

import json
import os
from pathlib import Path

import numpy as np

from tinytorch.models import transformer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tinytorch_tokenizer.json"  # CharTokenizer.load / BPETokenizer.load read it
INSTALL_HINT = 'pip install "tinytorch-course[hf]" (pip install -e ".[hf]" in a clone)'
GELU_TANH = ("gelu_new", "gelu_pytorch_tanh")  # GPT-2's GELU, tanh approximation, as ours
LAYER_NORM_EPS = 1e-5  # our LayerNorm's default and GPT-2's


class UnsupportedArchitecture(ValueError):
    """A model option GPT-2 (or tinytorch, on the way back) cannot express; the message names it."""


def _safetensors():
    try:
        import safetensors.numpy
    except ImportError:
        raise ImportError(
            f"the Hugging Face export needs the safetensors package: {INSTALL_HINT}"
        ) from None
    return safetensors.numpy


def check_gpt2_compatible(model) -> None:
    """Raise UnsupportedArchitecture, naming the option, unless GPT-2 computes what `model` does."""
    config = model.config
    if not config.norm_first:
        problem = "post-norm blocks (norm_first=False); GPT-2 normalises before each sub-layer"
    elif config.position != "learned":
        problem = f"position={config.position!r}; GPT-2 learns one vector per position"
    elif model.lm_head is not None and np.any(model.lm_head.bias.data):
        problem = (
            "a trained bias on the untied output layer (lm_head.bias), which GPT-2's lm_head "
            "lacks; train with tie_weights=True (GPT-2's own choice) to export"
        )
    elif {norm.eps for norm in _norms(model)} != {LAYER_NORM_EPS}:
        problem = f"LayerNorm eps other than {LAYER_NORM_EPS} in some layers"
    else:
        return
    raise UnsupportedArchitecture(f"GPT-2 cannot express {problem}")


def _norms(model) -> list:
    return [norm for b in model.blocks for norm in (b.ln1, b.ln2)] + [model.ln_f]


def gpt2_config(model) -> dict:
    """The config.json of `model` as a GPT2LMHeadModel (dropout off: ours has none)."""
    check_gpt2_compatible(model)
    c = model.config
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": c.vocab_size,
        "n_positions": c.max_seq_len,
        "n_embd": c.embed_dim,
        "n_layer": c.num_layers,
        "n_head": c.num_heads,
        "n_inner": model.blocks[0].mlp.linear1.weight.shape[1],  # mlp_ratio * embed_dim
        "activation_function": "gelu_new",
        "layer_norm_epsilon": LAYER_NORM_EPS,
        "tie_word_embeddings": model.lm_head is None,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "bos_token_id": None,  # GPT-2's 50256 lies outside a small vocabulary
        "eos_token_id": None,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "initializer_range": 0.02,
        "use_cache": True,
        "dtype": "float32",
    }


def _layout(model):
    """(GPT-2 name, our tensors in fused order, transposed?) for every GPT-2 weight."""
    yield "transformer.wte.weight", [model.token_embedding.weight], False
    yield "transformer.wpe.weight", [model.position_embedding.weight], False
    for i, block in enumerate(model.blocks):
        h, att, mlp = f"transformer.h.{i}.", block.attention, block.mlp
        qkv = (att.q_proj, att.k_proj, att.v_proj)  # c_attn = [q | k | v] on the output axis
        yield h + "ln_1.weight", [block.ln1.gamma], False
        yield h + "ln_1.bias", [block.ln1.beta], False
        yield h + "attn.c_attn.weight", [p.weight for p in qkv], False  # (C, 3C), (in, out)
        yield h + "attn.c_attn.bias", [p.bias for p in qkv], False  # (3C,)
        yield h + "attn.c_proj.weight", [att.out_proj.weight], False
        yield h + "attn.c_proj.bias", [att.out_proj.bias], False
        yield h + "ln_2.weight", [block.ln2.gamma], False
        yield h + "ln_2.bias", [block.ln2.beta], False
        yield h + "mlp.c_fc.weight", [mlp.linear1.weight], False
        yield h + "mlp.c_fc.bias", [mlp.linear1.bias], False
        yield h + "mlp.c_proj.weight", [mlp.linear2.weight], False
        yield h + "mlp.c_proj.bias", [mlp.linear2.bias], False
    yield "transformer.ln_f.weight", [model.ln_f.gamma], False
    yield "transformer.ln_f.bias", [model.ln_f.beta], False
    if model.lm_head is not None:
        yield "lm_head.weight", [model.lm_head.weight], True  # nn.Linear: (vocab, C)


def to_gpt2_state_dict(model) -> dict[str, np.ndarray]:
    """Every weight under GPT2LMHeadModel's name and layout, float32 (tied: no lm_head entry)."""
    check_gpt2_compatible(model)
    out = {}
    for name, tensors, transpose in _layout(model):
        value = np.concatenate([t.data for t in tensors], axis=-1)
        out[name] = np.ascontiguousarray(value.T if transpose else value, dtype=np.float32)
    return out


def _check_gpt2_config(config: dict) -> None:
    settings = [
        ("model_type", config.get("model_type"), "gpt2"),
        ("activation_function", config.get("activation_function", "gelu_new"), GELU_TANH),
        ("layer_norm_epsilon", config.get("layer_norm_epsilon", 1e-5), LAYER_NORM_EPS),
        ("scale_attn_weights", config.get("scale_attn_weights", True), True),
        ("scale_attn_by_inverse_layer_idx", config.get("scale_attn_by_inverse_layer_idx"), False),
        ("add_cross_attention", config.get("add_cross_attention", False), False),
    ]
    for key, value, wanted in settings:
        if value not in (wanted if isinstance(wanted, tuple) else (wanted, None)):
            raise UnsupportedArchitecture(
                f"tinytorch's GPT cannot express {key}={value!r} (it needs {wanted!r})"
            )


def from_gpt2_state_dict(config: dict, state: dict):
    """A tinytorch GPT holding the weights of a GPT-2 config and state dict (arrays)."""
    _check_gpt2_config(config)
    embed_dim = config["n_embd"]
    hidden = config.get("n_inner") or 4 * embed_dim
    model = transformer.GPT(
        config["vocab_size"], embed_dim, config["n_layer"], config["n_head"],
        max_seq_len=config["n_positions"], mlp_ratio=hidden / embed_dim,
        tie_weights=config.get("tie_word_embeddings", True),
    )  # fmt: skip
    if model.blocks and model.blocks[0].mlp.linear1.weight.shape[1] != hidden:
        raise UnsupportedArchitecture(f"n_inner={hidden} is not a whole multiple of n_embd")
    state = {k.removeprefix("transformer."): v for k, v in state.items()}
    for name, tensors, transpose in _layout(model):
        key = name.removeprefix("transformer.")
        if key not in state:
            raise KeyError(f"the GPT-2 checkpoint has no '{name}'; it is not a GPT-2 model")
        value = np.asarray(state[key], dtype=np.float32)
        parts = np.split(value.T if transpose else value, len(tensors), axis=-1)
        for tensor, part in zip(tensors, parts, strict=True):
            if part.shape != tensor.shape:
                raise ValueError(
                    f"'{name}' has shape {value.shape}, which does not fit config.json"
                )
            tensor.data[...] = part
    if model.lm_head is not None:
        model.lm_head.bias.data[...] = 0  # GPT-2's lm_head has no bias
    return model


def char_tokenizer_json(tokenizer) -> dict | None:
    """A character tokenizer as Hugging Face `tokenizers` JSON (one token per character), or None.

    AutoTokenizer then encodes and decodes as `tokenizer` does; a BPE tokenizer gets None and is
    reloaded with tinytorch's BPETokenizer from TOKENIZER_FILE.
    """
    if not hasattr(tokenizer, "chars"):
        return None
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Split",
            "pattern": {"Regex": "[\\s\\S]"},  # every character, newlines included, on its own
            "behavior": "Isolated",
            "invert": False,
        },
        "post_processor": None,
        "decoder": {"type": "Fuse"},  # concatenate the characters back, no spaces between
        "model": {
            "type": "WordLevel",
            "vocab": {token: i for i, token in enumerate(tokenizer.vocab)},
            "unk_token": "<unk>",
        },
    }


def _json_text(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def save_gpt2(model, folder, tokenizer=None) -> list[str]:
    """Write `folder` as `save_pretrained` would, plus the tokenizer; returns the file names.

    config.json and model.safetensors always; with a tokenizer, TOKENIZER_FILE (tinytorch's own)
    and, for a character tokenizer, tokenizer.json and tokenizer_config.json for AutoTokenizer.
    """
    tensors, config = to_gpt2_state_dict(model), gpt2_config(model)
    files = {
        CONFIG_FILE: _json_text(config),
        WEIGHTS_FILE: _safetensors().save(tensors, metadata={"format": "pt"}),  # the file's bytes
    }
    if tokenizer is not None:
        files[TOKENIZER_FILE] = None  # written by tokenizer.save
        described = char_tokenizer_json(tokenizer)
        if described is not None:
            files["tokenizer.json"] = _json_text(described)
            files["tokenizer_config.json"] = _json_text({
                "tokenizer_class": "PreTrainedTokenizerFast",
                "clean_up_tokenization_spaces": False,  # decode gives back the text unchanged
                "model_max_length": config["n_positions"],
            })  # fmt: skip
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        tmp = folder / (name + ".tmp")  # written whole, then renamed: never half a file
        if content is None:
            tokenizer.save(tmp)
        elif isinstance(content, bytes):
            tmp.write_bytes(content)
        else:
            tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, folder / name)
    return list(files)


def load_gpt2(folder):
    """The tinytorch GPT of a GPT-2 folder (config.json and model.safetensors, or its shards)."""
    folder = Path(folder)
    load_file = _safetensors().load_file
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {folder / CONFIG_FILE}: {err}") from None
    index = folder / (WEIGHTS_FILE + ".index.json")  # sharded checkpoints list their files
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() \
        else [WEIGHTS_FILE]  # fmt: skip
    state = {}
    for name in files:
        if not (folder / name).is_file():
            raise ValueError(f"{folder} has no {name}; save the model with safetensors")
        state.update(load_file(folder / name))
    return from_gpt2_state_dict(config, state)


# %% [markdown]
# ## 8. Counting parameters and memory
#
# Per block: attention has four `C x C` projections (`4C²`), the MLP two `C x 4C` ones (`8C²`),
# so a block holds about `12 C²` weights and the stack `12 L C²`. Add the embeddings (`V C` for
# tokens, `T_max C` for positions) and, untied, the output projection (`C V`). The exact count
# adds the biases and norm parameters, which `estimate_parameters` spells out beside the formula.
#
# Memory, in float32 bytes:
#
# | what | bytes |
# |---|---|
# | weights | 4 P |
# | gradients | 4 P |
# | Adam moments | 8 P |
# | one layer's attention matrix | B H T² 4 (training keeps scores and softmax, every layer) |
# | KV cache | 2 L B H T D 4 (keys and values, D = C / H) |
#
# The attention term is the one that grows with the square of the sequence length.


# %% nbgrader={"grade": false, "grade_id": "scaling", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def count_parameters(model: Module) -> int:
    """Number of trainable numbers in `model` (a tied matrix counts once)."""
    return sum(p.size for p in model.parameters())


def estimate_parameters(config: GPTConfig) -> dict[str, int]:
    """Exact parameter count of GPT(config) from the sizes alone, and the 12 L C² rule of thumb."""
    v, c, n, t = config.vocab_size, config.embed_dim, config.num_layers, config.max_seq_len
    hidden = int(c * config.mlp_ratio)
    attention = 4 * c * c + 4 * c  # q, k, v, out projections with biases
    mlp = 2 * c * hidden + hidden + c
    norms = 2 * 2 * c  # ln1 and ln2, gamma and beta each
    embeddings = v * c + (t * c if config.position == "learned" else 0)  # sinusoidal: no weights
    head = 0 if config.tie_weights else c * v + v
    exact = embeddings + n * (attention + mlp + norms) + 2 * c + head
    formula = 12 * n * c * c + embeddings + (0 if config.tie_weights else c * v)
    return {"exact": exact, "formula": formula, "per_block": attention + mlp + norms,
            "embeddings": embeddings}  # fmt: skip


def estimate_memory(config: GPTConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    """Bytes (float32) for training and generating with GPT(config) at (batch_size, seq_len)."""
    params = estimate_parameters(config)["exact"]
    b, t, c, n = batch_size, seq_len, config.embed_dim, config.num_layers
    h, d = config.num_heads, config.embed_dim // config.num_heads
    hidden = int(c * config.mlp_ratio)
    attention = b * h * t * t * 4  # one layer's (B, H, T, T) attention matrix
    # per block the graph keeps about 10 (B, T, C) arrays (norms, q, k, v, residuals), 2
    # (B, T, hidden) ones (MLP before and after GELU) and 2 attention matrices (scores and
    # softmax); plus the embeddings and the logits
    per_block = 4 * b * t * (10 * c + 2 * hidden) + 2 * attention
    activations = n * per_block + 4 * b * t * (2 * c + config.vocab_size)
    return {
        "weights": 4 * params,
        "gradients": 4 * params,
        "adam": 8 * params,
        "activations": activations,
        "attention": attention,
        "kv_cache": 2 * n * b * h * t * d * 4,  # keys and values of every layer
    }


# %% [markdown]
# ## 9. Encoder-only and encoder-decoder models from the same parts
#
# A BERT-style **encoder** is the GPT stack without the causal mask: every position sees every
# other, so its output vectors describe the whole input. An encoder-decoder (the 2017 translation
# model, T5) adds a **decoder block** with a third sub-layer between the two: *cross-attention*,
# whose queries come from the decoder and whose keys and values come from the encoder's output
# (`memory`). The decoder stays causal in its own self-attention, so it can still generate.
# Sources of unequal length are padded to one width; module 12's `padding_mask` then hides the
# padded positions from the encoder's self-attention and from the decoder's cross-attention.
#
# **Decoding with a cache.** The source does not change while the target is written, so
# `generate` runs the encoder once. Each decoder block then keeps two `KVCache`s: one grows by one
# position per step (its own causal self-attention, as in GPT), the other holds the memory's keys
# and values, projected on the first step and reused on every later one. Every step runs the
# decoder on the newest token only; the result equals running the full decoder again each step.
# `norm_first=False` builds the post-norm blocks of the 2017 paper throughout, as in GPT.


# %% nbgrader={"grade": false, "grade_id": "seq2seq", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export models.seq2seq
class DecoderBlock(Module):
    """Causal self-attention, cross-attention over the encoder output, and an MLP.

    `norm_first=True` (default) is pre-norm; `False` normalises after each residual addition.
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: float = 4, norm_first=True):
        self.self_attention = MultiHeadAttention(embed_dim, num_heads)  # checks the head count
        self.ln1 = LayerNorm(embed_dim)
        self.cross_attention = MultiHeadAttention(embed_dim, num_heads)
        self.ln_cross = LayerNorm(embed_dim)
        self.mlp = MLP(embed_dim, hidden_dim=int(embed_dim * mlp_ratio))
        self.ln2 = LayerNorm(embed_dim)
        self.norm_first = norm_first

    def forward(self, x, memory, mask=None, memory_mask=None, cache=None):
        """(B, T, C) -> (B, T, C). `cache` is this block's (self, cross) pair of KVCaches."""
        self_cache, cross_cache = (None, None) if cache is None else cache
        cross = dict(key=memory, value=memory, mask=memory_mask, cache=cross_cache)
        if self.norm_first:
            x = x + self.self_attention(self.ln1(x), mask, cache=self_cache)  # (B, T, C)
            x = x + self.cross_attention(self.ln_cross(x), **cross)  # (B, T, C)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.self_attention(x, mask, cache=self_cache))
        x = self.ln_cross(x + self.cross_attention(x, **cross))
        return self.ln2(x + self.mlp(x))


def _check_length(seq_len: int, max_seq_len: int, what: str) -> None:
    if seq_len > max_seq_len:
        raise ShapeError(
            f"{what} of {seq_len} positions exceeds max_seq_len={max_seq_len}; build the model "
            f"with a larger max_seq_len or shorten the {what}"
        )


class TransformerEncoder(Module):
    """Encoder-only stack: tokens (B, S) -> contextual vectors (B, S, C), no causal mask."""

    def __init__(self, vocab_size, embed_dim, num_layers, num_heads, max_seq_len=512,
                 norm_first=True):  # fmt: skip
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.position_embedding = Embedding(max_seq_len, embed_dim)
        self.blocks = [
            TransformerBlock(embed_dim, num_heads, norm_first=norm_first) for _ in range(num_layers)
        ]
        self.ln_f = LayerNorm(embed_dim)
        init_gpt2_weights(self, num_layers)

    def forward(self, tokens, mask=None):
        ids = token_ids_2d(tokens, self.vocab_size)  # (B, S)
        _check_length(ids.shape[1], self.max_seq_len, "source")
        x = self.token_embedding(ids) + self.position_embedding(np.arange(ids.shape[1])[None])
        for block in self.blocks:
            x = block(x, mask=mask)  # a padding mask, or None: every position sees every other
        return self.ln_f(x)  # (B, S, C)


class Seq2SeqTransformer(Module):
    """Encoder-decoder: source (B, S) and target prefix (B, T) -> target logits (B, T, vocab)."""

    def __init__(self, vocab_size, embed_dim, num_layers, num_heads, max_seq_len=512,
                 norm_first=True):  # fmt: skip
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.encoder = TransformerEncoder(
            vocab_size, embed_dim, num_layers, num_heads, max_seq_len, norm_first
        )
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.position_embedding = Embedding(max_seq_len, embed_dim)
        self.blocks = [
            DecoderBlock(embed_dim, num_heads, norm_first=norm_first) for _ in range(num_layers)
        ]
        self.ln_f = LayerNorm(embed_dim)
        self.lm_head = Linear(embed_dim, vocab_size)
        init_gpt2_weights(self, num_layers)

    def forward(self, source, target, source_mask=None):
        """`source_mask` (padding_mask of the source lengths) hides padded source positions."""
        return self.decode(target, self.encode(source, source_mask), source_mask)

    def encode(self, source, source_mask=None):
        """The encoder's output (B, S, C): the `memory` every decoder block attends to."""
        return self.encoder(source, mask=source_mask)

    def new_cache(self) -> list[tuple[KVCache, KVCache]]:
        """A (self-attention, cross-attention) pair of empty KVCaches per decoder block."""
        return [(KVCache(), KVCache()) for _ in self.blocks]

    def decode(self, target, memory, memory_mask=None, cache=None):
        """Logits (B, T, vocab). With `cache` (new_cache()), `target` continues its positions."""
        ids = token_ids_2d(target, self.vocab_size)  # (B, T)
        seq_len = ids.shape[1]
        past = 0 if cache is None else len(cache[0][0])
        _check_length(past + seq_len, self.max_seq_len, "target")
        positions = np.arange(past, past + seq_len)[None]  # (1, T)
        x = self.token_embedding(ids) + self.position_embedding(positions)  # (B, T, C)
        # causal over the cached and new positions; one new query may see them all: no mask
        mask = None if seq_len == 1 else causal_mask(seq_len, past_len=past)
        for i, block in enumerate(self.blocks):
            x = block(x, memory, mask=mask, memory_mask=memory_mask,
                      cache=None if cache is None else cache[i])  # fmt: skip
        return self.lm_head(self.ln_f(x))  # (B, T, vocab_size)

    @no_grad()
    def generate(self, source, start_token: int, max_new_tokens: int, source_mask=None, *,
                 temperature=0.0, top_k=None, seed=None, use_cache=None,
                 stop_token=None) -> np.ndarray:  # fmt: skip
        """(B, 1 + new) ids beginning with `start_token`; greedy unless temperature > 0.

        The encoder runs once. `use_cache` decodes one new position per step with module 17's
        KV caches (`cached_decode`; by default when module 17 is in the package), with the same
        result as re-running the decoder on the whole prefix. Once every row has produced
        `stop_token` generation ends early (finished rows repeat it).
        """
        memo = _cached_generation(use_cache)
        if memo is not None:
            return memo.cached_decode(self, source, start_token, max_new_tokens, source_mask,
                                      temperature=temperature, top_k=top_k, seed=seed,
                                      stop_token=stop_token)  # fmt: skip
        _check_generate_args(max_new_tokens, temperature, top_k, self.vocab_size, stop_token)
        _check_length(1 + max_new_tokens, self.max_seq_len, "target")
        memory = self.encode(source, source_mask)  # (B, S, C), computed once
        out = np.full((memory.shape[0], 1), start_token)
        token_ids_2d(out, self.vocab_size)  # start_token must be a token id
        rng = np.random.default_rng(seed)
        stopped = np.zeros(len(out), dtype=bool)
        for _ in range(max_new_tokens):
            logits = self.decode(out, memory, source_mask).data[:, -1]  # the whole prefix, (B, V)
            next_ids = sample_next(logits, temperature, top_k, rng)  # (B,)
            if stop_token is not None:
                next_ids = np.where(stopped, stop_token, next_ids)
                stopped |= next_ids == stop_token
            out = np.concatenate([out, next_ids[:, None]], axis=1)
            if stopped.all():
                break
        return out


# %% [markdown]
# ## Try it

# %%
np.random.seed(0)
tiny = GPT.from_config("tiny")
prompt = np.array([[1, 2, 3], [4, 5, 6]])
print(tiny(prompt).shape, tiny.generate(prompt, max_new_tokens=5, temperature=0.8, seed=0).shape)
print(count_parameters(tiny), estimate_parameters(tiny.config))

# %% [markdown]
# ## Tests
# Each graded cell defines a test and calls it.


# %% nbgrader={"grade": true, "grade_id": "test-layernorm", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def test_layernorm_normalises_each_position():
    x = Tensor(np.random.default_rng(0).normal(3.0, 5.0, (2, 4, 16)))
    y = LayerNorm(16)(x).data
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(axis=-1), 1, atol=1e-3)
    ln = LayerNorm(16)
    ln.gamma.data[:], ln.beta.data[:] = 2.0, 0.5
    np.testing.assert_allclose(ln(x).data, 2 * y + 0.5, atol=1e-5)


test_layernorm_normalises_each_position()


# %% nbgrader={"grade": true, "grade_id": "test-layernorm-grad", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def test_layernorm_backward_matches_differences():
    from tinytorch.core.autograd import numerical_gradient  # module 05's central differences

    rng = np.random.default_rng(1)
    x, g, b = rng.normal(size=(3, 5)), rng.normal(size=5), rng.normal(size=5)
    fn = LayerNormFunction()
    fn.needs_grad = (True, True, True)
    w = rng.normal(size=(3, 5))
    fn.forward(x, g, b)
    gx, gg, gb = fn.backward(w)
    for arr, got in [(x, gx), (g, gg), (b, gb)]:
        num = numerical_gradient(lambda: np.sum(LayerNormFunction().forward(x, g, b) * w), arr)
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-7)


test_layernorm_backward_matches_differences()


# %% nbgrader={"grade": true, "grade_id": "test-mlp-block", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def test_mlp_and_block_shapes():
    x = Tensor(np.random.default_rng(2).normal(size=(2, 6, 16)))
    mlp = MLP(16)
    assert mlp.linear1.weight.shape == (16, 64) and mlp(x).shape == (2, 6, 16)
    for norm_first in (True, False):
        block = TransformerBlock(16, num_heads=4, norm_first=norm_first)
        assert block(x, mask=causal_mask(6)).shape == (2, 6, 16)


test_mlp_and_block_shapes()


# %% nbgrader={"grade": true, "grade_id": "test-gpt", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def test_gpt_is_causal_and_generates():
    np.random.seed(3)
    gpt = GPT(vocab_size=20, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=8)
    tokens = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    logits = gpt(tokens).data
    assert logits.shape == (2, 5, 20)
    changed = tokens.copy()
    changed[:, 3:] = 0
    np.testing.assert_allclose(gpt(changed).data[:, :3], logits[:, :3], atol=1e-5)
    out = gpt.generate(tokens, max_new_tokens=6, temperature=0)  # runs past max_seq_len
    assert out.shape == (2, 11)
    again = gpt.generate(tokens, max_new_tokens=6, temperature=0, use_cache=False)
    np.testing.assert_array_equal(out, again)


test_gpt_is_causal_and_generates()
