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
#    rescale with learnable `gamma` and `beta`: a mean, a variance and a division, with autograd
#    doing the backward.
# 2. **MLP**: `Linear(C, 4C) -> GELU -> Linear(4C, C)`, applied to every position on its own.
# 3. **TransformerBlock**: `x = x + attention(ln1(x))`, then `x = x + mlp(ln2(x))`. The `x + ...`
#    paths carry the gradient straight down a deep stack; the norms keep each sub-layer's input tame.
# 4. **GPT**: embeddings, a list of blocks, a final norm, a vocabulary projection, a causal mask,
#    and `generate()`, which samples one token at a time and feeds it back in.
#
# The rest of this file (config presets, weight initialisation, the generation loop) is given: read
# it, it is what makes the model practical. Saving, the PyTorch and Hugging Face layouts, the
# parameter arithmetic and the encoder-decoder models are product code in given package files
# beside this module (section 7 says which).

# %%
#| default_exp models.transformer

# %% [markdown]
# `LayerNorm` and `MLP` are written below and exported to their own package files
# (`tinytorch/nn/normalization.py`, `tinytorch/nn/feedforward.py`); the export adds their import
# to `tinytorch/models/transformer.py`, while this notebook simply uses the classes you define.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from tinytorch.core.attention import MultiHeadAttention, causal_mask, check_heads
from tinytorch.core.autograd import no_grad
from tinytorch.core.embeddings import Embedding, PositionalEncoding
from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.models.decoding import _cached_generation, _check_generate_args, sampling_loop
from tinytorch.text.embeddings import token_ids_array

# isort: split

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
# Write it as the formula reads, with Tensor operations, and autograd derives the backward:
#
# ```
# mean = x.mean(axis=-1, keepdims=True)                       (..., 1)
# variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)   (..., 1)
# normalized = (x - mean) / (variance + eps) ** 0.5           (..., C)
# return gamma * normalized + beta
# ```
#
# `keepdims=True` keeps the reduced axis as size 1, so `x - mean` broadcasts over the features.
# The gradients of `gamma` and `beta` are summed over every leading axis (batch and sequence) by
# the engine, because they were broadcast in the forward. (Module 18 writes layer norm as one
# fused node with a hand-derived backward, and tests it against yours.)

# %%
#| export nn.normalization
import numpy as np

from tinytorch.core.layers import Module
from tinytorch.core.tensor import ShapeError, Tensor


# %% nbgrader={"grade": false, "grade_id": "layernorm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.normalization
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
        self.normalized_shape = size = int(tuple(shape)[0])
        self.gamma = Tensor(np.ones(size), requires_grad=True)  # scale, starts at 1
        self.beta = Tensor(np.zeros(size), requires_grad=True)  # shift, starts at 0
        self.eps = eps  # keeps the division finite for a constant input

    def forward(self, x):
        x = x if isinstance(x, Tensor) else Tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.normalized_shape:
            raise ShapeError(
                f"LayerNorm({self.normalized_shape}) got input of shape {x.shape}; its last axis "
                f"must have {self.normalized_shape} features"
            )
        ### BEGIN SOLUTION
        mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
        normalized = (x - mean) / (variance + self.eps) ** 0.5  # (..., C)
        return self.gamma * normalized + self.beta
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
# Write `forward` for both variants, passing the mask on to the attention.


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

    def forward(self, x, mask=None):
        """(B, T, C) -> (B, T, C). `mask` is additive, e.g. the causal mask."""
        ### BEGIN SOLUTION
        if self.norm_first:
            x = x + self.attention(self.ln1(x), mask)  # (B, T, C)
            x = x + self.mlp(self.ln2(x))
        else:
            x = self.ln1(x + self.attention(x, mask))
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
# - **top-k** keeps exactly the k largest logits and sets the rest to -inf, so rare junk is never
#   drawn. Where several logits tie at the k-th value, the lowest token ids stay (`torch.topk` also
#   keeps exactly k; a comparison `logits >= kth` would keep every tie, more than k).
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
        kth = np.partition(logits, -top_k, axis=-1)[:, -top_k, None]  # the k-th largest, (B, 1)
        above = logits > kth
        # exactly k stay: ties at the k-th value fill the rest, lowest ids first
        ties = logits == kth
        room = top_k - above.sum(axis=-1, keepdims=True)
        logits = np.where(above | (ties & (np.cumsum(ties, axis=-1) <= room)), logits, -np.inf)
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))  # unnormalised, (B, V)
    cdf = np.cumsum(probs, axis=-1)
    draws = rng.random((len(logits), 1)) * cdf[:, -1:]  # one uniform per row, scaled to the total
    return np.minimum((cdf <= draws).sum(axis=-1), logits.shape[-1] - 1)
    ### END SOLUTION


# %% [markdown]
# ### Keeping a sample from looping
#
# A small model's likeliest continuation is often a phrase it has just written, so greedy text
# falls into a loop ("the the the"). Two changes to the logits before the draw keep it moving; the
# given `steer_logits` (in `tinytorch/models/decoding.py`) applies both, just before your
# `sample_next`, in the given `sampling_loop` there: the one generation loop of the package, which
# `GPT.generate` hands how to get the next position's logits (the whole cropped context, again,
# each step; module 17 hands it a cached step instead):
#
# - **repetition penalty** (the CTRL paper): a token already in the context has a positive logit
#   divided by the penalty, a negative one multiplied by it (1 is off, 1.1 to 1.3 usual);
# - **top-p** (nucleus sampling): keep the smallest set of likeliest tokens whose probabilities add
#   up to at least p. Unlike top-k, the set is wide where the model is unsure, narrow where sure.
#   With both, top-k goes first and top-p works on the k survivors' renormalised probabilities
#   (Hugging Face's order): with probabilities [.3, .3, .2, .2], top_k=2 and top_p=0.5 keep one.


# %% [markdown]
# ## 6. GPT
#
# Three details matter:
#
# - **Positions.** Attention is order-blind, so each position `t` adds a learned vector
#   `position_embedding[t]` to its token vector. Positions exist only up to `max_seq_len`.
#   `position="sinusoidal"` swaps in module 11's fixed sine/cosine table, looked up by the same ids.
# - **The causal mask.** Position `i` may look at `j <= i` only. The additive mask has 0 on and below
#   the diagonal and -inf above; after softmax the blocked weights are exactly 0.
# - **Weight tying.** GPT-2 uses the token embedding matrix, transposed, as the output projection.
#   The gradients from both uses accumulate into the one parameter.
#
# Generating token `n+1` this way recomputes the keys and values of all `n` earlier positions,
# although they have not changed; module 17 (Memoization) keeps them instead, for this same class.
#
# Write `GPT.forward` (embeddings, blocks, final norm, projection) and `_create_causal_mask`,
# which hands module 12's `causal_mask(seq_len)` to the blocks as a Tensor.


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

    def forward(self, tokens):
        """Logits (B, T, vocab_size) for token ids (B, T)."""
        ids = token_ids_2d(tokens, self.vocab_size)
        batch, seq_len = ids.shape
        if seq_len > self.max_seq_len:
            raise ShapeError(
                f"sequence of {seq_len} positions exceeds max_seq_len={self.max_seq_len}; "
                f"crop to the last {self.max_seq_len} tokens (generate() does this for you)"
            )
        ### BEGIN SOLUTION
        positions = np.arange(seq_len)[None]  # (1, T)
        x = self.token_embedding(ids) + self.position_embedding(positions)  # (B, T, C)
        mask = self._create_causal_mask(seq_len)  # (T, T)
        for block in self.blocks:
            x = block(x, mask=mask)
        x = self.ln_f(x)  # (B, T, C)
        if self.lm_head is None:
            return x @ self.token_embedding.weight.T  # (B, T, vocab_size), tied weights
        return self.lm_head(x)  # (B, T, vocab_size)
        ### END SOLUTION

    def _create_causal_mask(self, seq_len: int) -> Tensor:
        """Additive mask (seq_len, seq_len): 0 where query i may see key j <= i, -inf after."""
        ### BEGIN SOLUTION
        return Tensor(causal_mask(seq_len))  # module 12 builds it; one definition
        ### END SOLUTION

    @no_grad()
    def generate(self, prompt_tokens, max_new_tokens=50, temperature=1.0, top_k=None, seed=None,
                 use_cache=None, stop_token=None, top_p=None,
                 repetition_penalty=1.0) -> np.ndarray:  # fmt: skip
        """Continue every prompt row; returns int64 token ids (B, prompt_len + new).

        temperature 0 is greedy; `top_k` keeps the k likeliest tokens, `top_p` the likeliest
        holding that probability, `repetition_penalty` lowers tokens already in the context
        (`steer_logits`); `seed` makes sampling reproducible; the context is cropped to
        max_seq_len; `use_cache` runs module 17's KV cache (`cached_generate`; by default when
        module 17 is in the package), with the same tokens as recomputing; once every row has
        produced `stop_token` generation ends early (finished rows are padded with it).
        """
        memo = _cached_generation(use_cache, self)
        if memo is not None:
            steer = {"top_p": top_p, "repetition_penalty": repetition_penalty}
            return memo.cached_generate(
                self, prompt_tokens, max_new_tokens, temperature, top_k, seed, stop_token, **steer
            )
        _check_generate_args(max_new_tokens, temperature, top_k, self.vocab_size, stop_token)
        tokens = token_ids_2d(prompt_tokens, self.vocab_size)  # (B, T)

        def next_logits(tokens):  # the whole context again, every step
            context = tokens[:, -self.max_seq_len :]  # learned positions stop at max_seq_len
            return self.forward(context).data[:, -1]  # the last position's logits, (B, V)

        return sampling_loop(tokens, next_logits, sample_next, max_new_tokens,
                             temperature=temperature, top_k=top_k, seed=seed,
                             stop_token=stop_token, top_p=top_p,
                             repetition_penalty=repetition_penalty,
                             context=self.max_seq_len)  # fmt: skip


# %% [markdown]
# ## 7. How big is it, and what the given files add
#
# Per block, attention has four `C x C` projections (`4C²`) and the MLP two `C x 4C` ones (`8C²`):
# about `12 L C²` weights for the stack, plus the embeddings (`V C` for tokens, `T_max C` for
# learned positions) and, untied, the output projection (`C V`). In float32 training needs `4 P`
# bytes for the weights, as many for their gradients and `8 P` for Adam's two moments; one layer's
# attention matrix takes `4 B H T²` bytes, the term that grows with the square of the sequence.
#
# Given package files beside this module (product code, not the lesson; read them once your GPT
# works): `models/scaling.py` spells those counts out (the scaling milestone uses it);
# `models/weights.py` saves and loads a GPT as one `.npz` (`allow_pickle=False`) and renames its
# weights to PyTorch's layout; `models/huggingface.py` writes what `GPT2LMHeadModel` reads (a
# pre-norm GPT with learned positions is GPT-2; docs/huggingface.md); `models/seq2seq.py` builds
# the encoder (this stack without the mask) and the 2017 encoder-decoder, whose decoder blocks add
# cross-attention to the encoder's output, from your blocks; the translate milestone trains it.


# %% [markdown]
# ## Try it

# %%
np.random.seed(0)
tiny = GPT.from_config("tiny")
prompt = np.array([[1, 2, 3], [4, 5, 6]])
print(tiny(prompt).shape, tiny.generate(prompt, max_new_tokens=5, temperature=0.8, seed=0).shape)
print(sum(p.size for p in tiny.parameters()), "parameters")

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded
from tinytorch.core.autograd import numerical_gradient  # module 05's central differences
from tinytorch.core.tensor import precision


def backward_with(out: Tensor, rng) -> None:
    """Backpropagate a random gradient from `out`."""
    (out * Tensor(rng.standard_normal(out.shape).astype(out.dtype))).sum().backward()


def grads_of(module) -> np.ndarray:
    """Every parameter's gradient, in the module's own order, as one array."""
    return np.concatenate([np.ravel(p.grad) for p in module.parameters()])


def randomise_norms(module, rng) -> None:
    """LayerNorm scales and shifts away from their 1 and 0, so each one matters."""
    for name, p in module.named_parameters():
        if name.endswith(("gamma", "beta")):
            p.data = (rng.uniform(0.5, 1.5, p.shape) * rng.choice([-1, 1], p.shape)).astype(p.dtype)


# %% nbgrader={"grade": true, "grade_id": "test-layernorm", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades="layernorm")
def test_layernorm_normalises_each_position(rng):
    x = Tensor(rng.normal(3.0, 5.0, (2, 4, 16)))
    y = LayerNorm(16)(x).data
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(axis=-1), 1, atol=1e-3)
    ln = LayerNorm(16)
    ln.gamma.data[:], ln.beta.data[:] = 2.0, 0.5
    np.testing.assert_allclose(ln(x).data, 2 * y + 0.5, atol=1e-5)
    randomise_norms(ln, rng)
    x = Tensor(rng.normal(1.0, 3.0, (2, 3, 16)).astype(np.float32), requires_grad=True)
    out = ln(x)
    backward_with(out, rng)
    quiet = ln(Tensor(rng.normal(0.0, 0.03, (3, 16)).astype(np.float32))).data  # eps matters
    return {"y": out.data, "dx": x.grad, "dgamma": ln.gamma.grad, "dbeta": ln.beta.grad,
            "quiet": quiet}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-layernorm-grad", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-7, grades="layernorm")
def test_layernorm_backward_matches_differences(rng):
    x, g, b = rng.normal(size=(3, 5)), rng.normal(size=5), rng.normal(size=5)
    w = rng.normal(size=(3, 5))
    with precision(np.float64):  # the Tensors below share x, g and b, which the check changes
        ln = LayerNorm(5)
        ln.gamma, ln.beta = Tensor(g, requires_grad=True), Tensor(b, requires_grad=True)
        xt = Tensor(x, requires_grad=True)
        y = ln(xt)
        (y * Tensor(w)).sum().backward()
        for arr, got in [(x, xt.grad), (g, ln.gamma.grad), (b, ln.beta.grad)]:
            num = numerical_gradient(lambda: np.sum(ln(Tensor(x)).data * w), arr)
            np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-7)
    return {"y": y.data, "dx": xt.grad, "dgamma": ln.gamma.grad, "dbeta": ln.beta.grad}


# %% nbgrader={"grade": true, "grade_id": "test-mlp-block", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades=("mlp", "block"))
def test_mlp_and_block_shapes(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    x = Tensor(rng.normal(size=(2, 6, 16)).astype(np.float32), requires_grad=True)
    mlp = MLP(16)
    assert mlp.linear1.weight.shape == (16, 64) and mlp(x).shape == (2, 6, 16)
    out = mlp(x)
    backward_with(out, rng)
    found = {"mlp": out.data, "mlp_dx": x.grad, "mlp_dparams": grads_of(mlp)}
    for norm_first in (True, False):
        block = TransformerBlock(16, num_heads=4, norm_first=norm_first)
        randomise_norms(block, rng)
        assert block(x, mask=causal_mask(6)).shape == (2, 6, 16)
        x = Tensor(x.data, requires_grad=True)
        out = block(x, mask=causal_mask(6))
        backward_with(out, rng)
        name = "pre" if norm_first else "post"
        found |= {name: out.data, f"{name}_dx": x.grad, f"{name}_dparams": grads_of(block)}
    return found


# %% nbgrader={"grade": true, "grade_id": "test-gpt", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades="gpt")
def test_gpt_is_causal_and_generates(rng):
    np.random.seed(int(rng.integers(1 << 30)))
    gpt = GPT(vocab_size=20, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=8)
    randomise_norms(gpt, rng)
    for p in gpt.parameters():  # sharper than the init, so the logits differ by token
        p.data *= 4 if p.ndim == 2 else 1
    tokens = rng.integers(0, 20, size=(2, 5))
    logits = gpt(tokens).data
    assert logits.shape == (2, 5, 20)
    changed = tokens.copy()
    changed[:, 3:] = 0
    np.testing.assert_allclose(gpt(changed).data[:, :3], logits[:, :3], atol=1e-5)
    out = gpt.generate(tokens, max_new_tokens=6, temperature=0)  # runs past max_seq_len
    assert out.shape == (2, 11)
    again = gpt.generate(tokens, max_new_tokens=6, temperature=0, use_cache=False)
    np.testing.assert_array_equal(out, again)
    backward_with(gpt(tokens), rng)
    tied = GPT(vocab_size=20, embed_dim=16, num_layers=1, num_heads=2, max_seq_len=8,
               tie_weights=True)  # fmt: skip
    randomise_norms(tied, rng)
    tied_logits = tied(tokens)
    backward_with(tied_logits, rng)  # the head's gradient reaches the shared embedding
    return {"logits": logits, "dparams": grads_of(gpt), "greedy": out,
            "tied": tied_logits.data, "tied_dparams": grads_of(tied)}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-sample", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="sample")
def test_sample_next(rng):
    scores = rng.normal(scale=2.0, size=(64, 20))
    draws = [
        sample_next(scores, temperature, top_k, np.random.default_rng(7))
        for temperature, top_k in ((0.5, None), (2.0, None), (0.8, 3))
    ]
    return {"greedy_rows": sample_next(scores, 0, None, None), "sampled": np.stack(draws)}
