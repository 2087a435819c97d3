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
# # Module 17 — Memoization: the KV cache
#
# Memoization is remembering the answer to a question you will be asked again. A GPT writing
# token `n + 1` runs its whole network over all `n` earlier positions, although nothing about
# them has changed since it wrote token `n`: their keys and values are the same numbers as
# last time. Only the newest position is new.
#
# ```
# without a cache, step n:   project n positions -> attend n x n        O(n^2) per layer
# with a cache,    step n:   project 1 position  -> attend 1 x n        O(n)   per layer
# ```
#
# Across a whole generation of `N` tokens that is `O(N^3)` work against `O(N^2)`. The price is
# memory: every layer keeps the keys and values of every position of every sequence,
#
#     2 x layers x batch x heads x seq_len x head_dim x bytes per element,
#
# the "2" for keys and values. You will build:
#
# 1. **`KVCache`**: one layer's keys and values, `(B, H, T, D)` each, with `append`, `len`,
#    `reset` and `nbytes`; and `kv_cache_bytes`, the formula above, checked against it.
# 2. **`cached_attention`**: module 12's attention for the newest positions only, reading the
#    earlier keys and values from the cache.
# 3. **`cached_forward` and `cached_generate`**: module 13's GPT run one new position at a time,
#    without touching its class. `GPT.generate` calls them when this module is in the package;
#    the given `cached_decode` does the same for the encoder-decoder of `tito milestone run
#    translate`, from your `KVCache` and `cached_attention`.
#
# The cache changes how much work is done, never the answer: cached generation must write the
# same tokens as recomputing everything, greedy or sampled. Every test below checks that.

# %%
#| default_exp memo.kvcache

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
"""One attention layer's keys and values kept across generation steps (module 17)."""

from __future__ import annotations

import numpy as np

from tinytorch.core.tensor import ShapeError

# %% [markdown]
# ## 1. The cache of one layer
#
# A `KVCache` holds keys `k` and values `v` of shape `(B, H, T, D)`: batch, heads, positions,
# head size. `append(k_new, v_new)` adds `T_new` positions and returns all keys and values so
# far, ready for attention.
#
# Concatenating `np.concatenate([k, k_new], axis=2)` each step would copy the whole past every
# time: `O(n)` per step, `O(n^2)` per generation, the very cost the cache exists to remove. So the
# given code keeps a buffer with room to spare and `append` writes the new positions into its
# free slots: `self._k[:, :, self.length : end] = k_new`. When the buffer is full it doubles
# (`_grow`), so copies stay rare; `max_len` (the model's context) caps the room.
#
# `k` and `v` are views of the filled part: no copy. `nbytes` is what the buffers really take.


# %% nbgrader={"grade": false, "grade_id": "cache", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class KVCache:
    """Keys and values of one attention layer: `k`, `v` are (B, H, T, D) numpy views."""

    def __init__(self, max_len: int | None = None):
        if max_len is not None and (not isinstance(max_len, (int, np.integer)) or max_len < 1):
            raise ValueError(
                f"KVCache: max_len must be a positive integer or None, got {max_len!r}"
            )
        self.max_len = max_len
        self._k: np.ndarray | None = None  # (B, H, capacity, D)
        self._v: np.ndarray | None = None
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def k(self) -> np.ndarray | None:
        return None if self._k is None else self._k[:, :, : self.length]

    @property
    def v(self) -> np.ndarray | None:
        return None if self._v is None else self._v[:, :, : self.length]

    @property
    def nbytes(self) -> int:
        """Bytes held by the key and value buffers."""
        return 0 if self._k is None else self._k.nbytes + self._v.nbytes

    def reset(self) -> None:
        """Forget every position; the buffers are kept for the next sequence of the same shape
        (one of another batch size, head count or head size gets new ones)."""
        self.length = 0

    def append(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add the new positions' keys and values (B, H, T_new, D); return all of them."""
        self._check(k, v)
        end = self.length + k.shape[2]
        if self._k is None or end > self._k.shape[2] or not self._holds(k):
            self._grow(k, v, end)
        ### BEGIN SOLUTION
        self._k[:, :, self.length : end] = k  # into the free slots: no copy of the past
        self._v[:, :, self.length : end] = v
        self.length = end
        ### END SOLUTION
        return self.k, self.v

    def _check(self, k: np.ndarray, v: np.ndarray) -> None:
        if k.ndim != 4 or k.shape != v.shape:
            raise ShapeError(
                f"KVCache.append needs keys and values of one shape (B, H, T, D), got k "
                f"{k.shape} and v {v.shape}"
            )
        if self.length and not self._holds(k):  # an empty cache takes any shape
            raise ShapeError(
                f"KVCache holds keys of shape {self.k.shape} but got {k.shape}; use one cache "
                "per layer and the same batch size for every step (or reset() the cache)"
            )
        if self.max_len is not None and self.length + k.shape[2] > self.max_len:
            raise ShapeError(
                f"KVCache: {self.length} cached + {k.shape[2]} new positions exceed "
                f"max_len={self.max_len}; reset() the cache and start from a cropped window"
            )

    def _holds(self, k: np.ndarray) -> bool:
        """The buffers have `k`'s batch size, head count and head size."""
        return (
            self._k is not None
            and k.shape[:2] + k.shape[3:] == self._k.shape[:2] + self._k.shape[3:]
        )

    def _grow(self, k: np.ndarray, v: np.ndarray, needed: int) -> None:
        """Move the cached positions into buffers with room for at least `needed` positions."""
        capacity = max(needed, 2 * (0 if self._k is None else self._k.shape[2]), 16)
        if self.max_len is not None:
            capacity = min(capacity, self.max_len)
        old_k, old_v = self.k, self.v
        self._k = np.empty((*k.shape[:2], capacity, k.shape[3]), dtype=k.dtype)
        self._v = np.empty((*v.shape[:2], capacity, v.shape[3]), dtype=v.dtype)
        if old_k is not None and self.length:
            self._k[:, :, : self.length] = old_k
            self._v[:, :, : self.length] = old_v

    def __repr__(self):
        shape = None if self._k is None else self.k.shape
        return f"KVCache(length={self.length}, shape={shape}, nbytes={self.nbytes})"


# %% [markdown]
# ## 2. How much memory a cache takes
#
# Every layer keeps keys and values, each `(B, H, T, D)`:
#
#     2 x layers x batch x heads x seq_len x head_dim x bytes_per_element
#
# Since `H x D` is the model width `C`, that is `2 L B T C` numbers: for GPT-2 small (12 layers,
# width 768) 73,728 bytes per token in float32, 75 MB for a full 1024-token context of one
# sequence. Write the formula; the test fills real caches and compares.
#
# `cache_bytes(caches)` measures: the sum of `nbytes` over a model's caches.


# %% nbgrader={"grade": false, "grade_id": "bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def kv_cache_bytes(num_layers: int, batch: int, num_heads: int, seq_len: int, head_dim: int,
                   bytes_per_element: int = 4) -> int:  # fmt: skip
    """Predicted bytes of the keys and values of every layer for `seq_len` positions."""
    ### BEGIN SOLUTION
    return 2 * num_layers * batch * num_heads * seq_len * head_dim * bytes_per_element
    ### END SOLUTION


def cache_bytes(caches) -> int:
    """Measured bytes of a model's caches: a list of KVCache, or of (self, cross) pairs."""
    total = 0
    for entry in caches:
        total += sum(c.nbytes for c in entry) if isinstance(entry, tuple) else entry.nbytes
    return total


# %% [markdown]
# ## 3. Attention over cached keys
#
# `cached_attention(attn, x, cache, mask)` gives a module-12 `MultiHeadAttention` its cache
# without changing the class: it uses the layer's own projections `q_proj`, `k_proj`, `v_proj`,
# `out_proj` (module 03's `Linear`) on the new positions `x` `(B, T_new, E)` only.
#
# 1. Project `x` to q, k, v and split each into heads, `(B, T, E) -> (B, H, T, D)` (`_heads`).
# 2. Append the new k, v to the cache; attend the new queries over **all** cached keys:
#    `softmax(q kᵀ / sqrt(D) + mask) v`, with `_softmax` below (a row blocked everywhere gives
#    zeros, as in module 12).
# 3. Merge the heads back, `(B, H, T, D) -> (B, T, H * D)`, and apply `out_proj`.
#
# Merge to `H * D` columns (`reshape(batch, steps, -1)`), not to the model width `E`: they are
# equal for a whole layer, but module 16's `PrunedAttention` keeps fewer heads, so its
# projections write `H * D < E` features and its `out_proj` reads `H * D`. The olympics and
# `tito milestone run compress` generate from such head-pruned GPTs with this cache, and a test
# here builds a layer with fewer heads than `E / D` to check it. `attn.num_heads` is the number
# of heads the layer has (after pruning), and `D` is `q.shape[-1]`.
#
# One new query may see every cached key, so it needs no mask. `T_new` new queries after `past`
# cached ones need module 12's `causal_mask(T_new, past_len=past)`, shape `(T_new, past + T_new)`.
#
# For cross-attention (the decoder of an encoder-decoder) pass the encoder's output as
# `memory=`: keys and values come from it, not from `x`. It does not change while the target is
# written, so it is projected once, on the first call, and read from the cache after that.
#
# Generation builds no graph: the functions of this module run under `no_grad`.

# %% nbgrader={"grade": false, "grade_id": "generation-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export memo.generation
"""Cached generation for module 13's models without changing their classes (module 17)."""

import numpy as np

from tinytorch.core.attention import causal_mask
from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.models.decoding import _check_generate_args, sampling_loop
from tinytorch.models.transformer import sample_next, token_ids_2d


def _heads(t: Tensor, num_heads: int) -> np.ndarray:
    """(B, T, E) Tensor -> (B, H, T, D) array: the heads side by side."""
    batch, steps, embed = t.shape
    return t.data.reshape(batch, steps, num_heads, embed // num_heads).transpose(0, 2, 1, 3)


def _softmax(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row that is -inf everywhere becomes zeros, not nan."""
    peak = scores.max(axis=-1, keepdims=True)
    peak[np.isneginf(peak)] = 0
    e = np.exp(scores - peak)
    total = e.sum(axis=-1, keepdims=True)
    total[total == 0] = 1
    return e / total


def _mask(mask) -> np.ndarray | None:
    return None if mask is None else np.asarray(getattr(mask, "data", mask))


# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export memo.generation
def cached_attention(attn, x, cache: KVCache, mask=None, memory=None) -> Tensor:
    """Module 12's attention output (B, T_new, E) for the new positions `x`, keys from `cache`."""
    x = x if isinstance(x, Tensor) else Tensor(x)
    heads = attn.num_heads
    batch, steps = x.shape[:2]
    ### BEGIN SOLUTION
    q = _heads(attn.q_proj(x), heads)  # (B, H, T_new, D)
    if memory is None:  # self-attention: the new positions' keys and values join the cache
        k, v = cache.append(_heads(attn.k_proj(x), heads), _heads(attn.v_proj(x), heads))
    else:  # cross-attention: the memory is projected once
        if len(cache) == 0:
            cache.append(_heads(attn.k_proj(memory), heads), _heads(attn.v_proj(memory), heads))
        k, v = cache.k, cache.v
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])  # (B, H, T_new, T_past + T_new)
    if mask is not None:
        scores = scores + _mask(mask)
    weights = _softmax(scores)
    out = weights @ v  # (B, H, T_new, D)
    merged = out.transpose(0, 2, 1, 3).reshape(batch, steps, -1)  # (B, T_new, H * D)
    ### END SOLUTION
    if getattr(attn, "keep_attention", False):
        attn.last_attention = weights  # what module 12's layer keeps for plotting
    return attn.out_proj(Tensor(merged))


# %% [markdown]
# ## 4. A GPT, one new position at a time
#
# `cached_forward(model, tokens, caches)` is module 13's `GPT.forward` with two changes:
#
# - **positions continue** from the cache: the new tokens sit at `past .. past + T - 1`, where
#   `past = len(caches[0])`, not at `0 .. T - 1`;
# - each block's attention is `cached_attention` with that block's cache; its norms, MLP and
#   residual additions are the block's own (`block.ln1`, `block.mlp`, ...; pre-norm when
#   `block.norm_first`, else post-norm).
#
# Then the final norm and the output projection (the transposed token embedding when the
# weights are tied, `model.lm_head` is None).
#
# `new_caches(model)` makes one `KVCache` per block, each capped at the model's context.


# %% nbgrader={"grade": false, "grade_id": "forward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export memo.generation
def new_caches(model) -> list[KVCache]:
    """One empty KVCache per block of `model`, for `cached_forward`."""
    return [KVCache(max_len=model.max_seq_len) for _ in model.blocks]


def cached_block(block, x: Tensor, cache: KVCache, mask=None) -> Tensor:
    """A module-13 TransformerBlock on the new positions `x` (B, T_new, C), attention cached."""
    ### BEGIN SOLUTION
    if block.norm_first:
        x = x + cached_attention(block.attention, block.ln1(x), cache, mask)
        return x + block.mlp(block.ln2(x))
    x = block.ln1(x + cached_attention(block.attention, x, cache, mask))
    return block.ln2(x + block.mlp(x))
    ### END SOLUTION


@no_grad()
def cached_forward(model, tokens, caches: list[KVCache]) -> Tensor:
    """Logits (B, T_new, vocab) of a module-13 GPT; `tokens` continue the cached positions."""
    ids = token_ids_2d(tokens, model.vocab_size)
    steps, past = ids.shape[1], len(caches[0])
    if past + steps > model.max_seq_len:
        raise ShapeError(
            f"{past} cached + {steps} new positions exceed max_seq_len={model.max_seq_len}; "
            "start new caches from the last max_seq_len tokens (cached_generate does this)"
        )
    ### BEGIN SOLUTION
    positions = np.arange(past, past + steps)[None]  # (1, T_new), after the cached ones
    x = model.token_embedding(ids) + model.position_embedding(positions)  # (B, T_new, C)
    mask = None if steps == 1 else causal_mask(steps, past_len=past)  # (T_new, past + T_new)
    for block, cache in zip(model.blocks, caches):
        x = cached_block(block, x, cache, mask)
    x = model.ln_f(x)
    if model.lm_head is None:
        return x @ model.token_embedding.weight.T  # tied weights
    return model.lm_head(x)  # (B, T_new, vocab)
    ### END SOLUTION


# %% [markdown]
# ## 5. Generating with the cache
#
# `cached_generate` (given) runs module 13's `generate` loop, the given `sampling_loop`: the same
# arguments, the same `steer_logits` and `sample_next`, the same random generator, so with the
# same seed it draws the same tokens. Only the logits of the next position differ: the loop asks
# your `_next_logits(model, tokens, caches)` for them, with `tokens` every id so far `(B, T)`, and
# it returns the next position's logits `(B, V)` as a numpy array:
#
# - the first step reads the whole prompt into fresh caches (one `cached_forward` of T tokens);
# - every later step feeds the newest token only;
# - once the sequence is longer than `max_seq_len` the window slides: every position moves, so
#   every cached key belongs to the wrong position. The caches are refilled from the cropped
#   window, which is exactly what the uncached model computes.
#
# `GPT.generate(..., use_cache=True)` (and its default when this module is in the package)
# calls `cached_generate`.


# %% nbgrader={"grade": false, "grade_id": "generate", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export memo.generation
def _next_logits(model, tokens: np.ndarray, caches: list[KVCache]) -> np.ndarray:
    """Logits (B, V) of the next position, extending `caches` while the context fits."""
    ### BEGIN SOLUTION
    past = len(caches[0])
    if past == tokens.shape[1] - 1 and past < model.max_seq_len:
        return cached_forward(model, tokens[:, -1:], caches).data[:, -1]  # one new position
    for cache in caches:  # the first step, or the window slid: refill from the window
        cache.reset()
    return cached_forward(model, tokens[:, -model.max_seq_len :], caches).data[:, -1]
    ### END SOLUTION


@no_grad()
def cached_generate(model, prompt_tokens, max_new_tokens=50, temperature=1.0, top_k=None,
                    seed=None, stop_token=None, top_p=None,
                    repetition_penalty=1.0) -> np.ndarray:  # fmt: skip
    """Module 13's GPT.generate with a KV cache: the same tokens, one new position per step."""
    _check_generate_args(max_new_tokens, temperature, top_k, model.vocab_size, stop_token)
    tokens = token_ids_2d(prompt_tokens, model.vocab_size)  # (B, T)
    caches = new_caches(model)
    return sampling_loop(tokens, lambda tokens: _next_logits(model, tokens, caches), sample_next,
                         max_new_tokens, temperature=temperature, top_k=top_k, seed=seed,
                         stop_token=stop_token, top_p=top_p,
                         repetition_penalty=repetition_penalty,
                         context=model.max_seq_len)  # fmt: skip


# %% [markdown]
# ## 6. The encoder-decoder (given)
#
# The translation model of module 13 (`Seq2SeqTransformer`) writes its target one token at a time
# too. Its encoder runs once; each decoder block then needs **two** caches: one for its causal
# self-attention (grows by one position per step, as in GPT) and one for its cross-attention
# (the encoder output's keys and values, projected on the first step, `memory=` of your
# `cached_attention`). The given file `tinytorch/memo/decoder.py` builds `cached_decode` from your
# `KVCache` and `cached_attention` and the same `sampling_loop`; read it once your GPT caches.


# %% [markdown]
# ## 7. What the cache buys
#
# Time for one new token at context length `n`, without the cache (a forward over all `n`
# positions, what `generate(use_cache=False)` does each step) and with it (one position against
# `n` cached ones). The measurement runs here, in the notebook; the project's benchmark
# (`benchmarks/`) measures whole generations against PyTorch. There the GPT is module 18's
# accelerated one, which runs these same steps in one numpy pass a token instead of a layer
# call per operation (the given `tinytorch/accel/decode.py`, worth reading after module 18).

# %% tags=["demo"]
import time

from matplotlib.figure import Figure

from tinytorch.core.transformer import GPT


def seconds_per_token(model, length: int, cached: bool, repeats: int = 3) -> float:
    """Fastest of `repeats` timings of the step that writes token `length + 1`."""
    tokens = np.random.default_rng(0).integers(0, model.vocab_size, size=(1, length + 1))
    best = float("inf")
    for _ in range(repeats):
        caches = new_caches(model)
        if cached:
            cached_forward(model, tokens[:, :length], caches)  # the past, read once
        began = time.perf_counter()
        if cached:
            cached_forward(model, tokens[:, length:], caches)
        else:
            with no_grad():
                model(tokens[:, : length + 1])
        best = min(best, time.perf_counter() - began)
    return best


np.random.seed(0)
timed = GPT(vocab_size=64, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=512)
lengths = [16, 32, 64, 128, 256, 511]
plain = [seconds_per_token(timed, n, cached=False) for n in lengths]
fast = [seconds_per_token(timed, n, cached=True) for n in lengths]
for n, a, b in zip(lengths, plain, fast):
    print(f"context {n:4d}: {a * 1e3:7.3f} ms without the cache, {b * 1e3:6.3f} ms with it")
figure = Figure(figsize=(6, 4))
axes = figure.subplots()
axes.loglog(lengths, plain, "o-", label="without cache: whole context each step")
axes.loglog(lengths, fast, "s-", label="with cache: one new position")
axes.set_xlabel("context length n")
axes.set_ylabel("seconds per new token")
axes.legend()
figure  # noqa: B018  (the notebook shows the figure)

# %% [markdown]
# On a log-log plot a power law is a straight line whose slope is its exponent. Without the cache
# the time grows with the whole context: linear in `n` for the projections and MLP, quadratic for
# the `n x n` attention, which takes over at long contexts. With the cache one position is
# projected and it attends to `n` keys: the time barely moves until the `1 x n` attention, linear
# in `n`, shows. At short contexts both are dominated by the fixed cost of a step.

# %% [markdown]
# ## 8. Memoization elsewhere in the course
#
# The KV cache is memoization of one function, "keys and values of position t", whose answer
# never changes once t is written. Other places in the course follow the same rule:
#
# - **autograd** (module 05) keeps each operation's inputs or outputs from the forward pass for
#   the backward, instead of recomputing them; module 18 shows when recomputing is the better
#   trade (activation checkpointing).
# - **the BPE tokenizer** (module 10) encodes text word by word; a word's pieces depend only on
#   the word, so a dictionary from word to ids lets a long text pay for each distinct word once.
#
# What makes a result safe to remember is the same each time: it depends only on inputs that
# cannot change while it is kept. The window sliding past `max_seq_len` breaks exactly that for
# the KV cache (every position moves), which is why `cached_generate` refills it then.

# %% [markdown]
# ## Try it

# %%
from tinytorch.core.transformer import GPT

np.random.seed(0)
gpt = GPT(vocab_size=32, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=16)
prompt = np.array([[1, 2, 3], [4, 5, 6]])
print(cached_generate(gpt, prompt, max_new_tokens=20, temperature=0))  # slides past 16
caches = new_caches(gpt)
cached_forward(gpt, prompt, caches)
print(caches[0], cache_bytes(caches), kv_cache_bytes(2, 2, 4, 3, 8))

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs on a seeded generator, asserts what must hold,
# and returns the numbers a grader compares with the reference's.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded
from tinytorch.core.attention import MultiHeadAttention
from tinytorch.core.layers import Linear
from tinytorch.core.transformer import GPT


# %% nbgrader={"grade": true, "grade_id": "test-cache", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="cache")
def test_cache_appends_every_position(rng):
    cache = KVCache()
    keys, values = [], []
    for size in (3, 1, 1, 20, 1, 40):  # past the first buffer and across two regrowths
        k, v = rng.normal(size=(2, 3, size, 4)), rng.normal(size=(2, 3, size, 4))
        keys.append(k)
        values.append(v)
        got_k, got_v = cache.append(k, v)
        assert len(cache) == sum(len(x[0, 0]) for x in keys)
        np.testing.assert_array_equal(got_k, np.concatenate(keys, axis=2))
        np.testing.assert_array_equal(got_v, np.concatenate(values, axis=2))
    length = len(cache)
    cache.reset()
    assert len(cache) == 0 and cache.k.shape == (2, 3, 0, 4)
    return {"k": got_k, "v": got_v, "length": np.array(length)}


# %% nbgrader={"grade": true, "grade_id": "test-bytes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="bytes")
def test_memory_formula_matches_measured_bytes(rng):
    layers, batch, heads, steps, dim = (int(n) for n in rng.integers(1, 6, size=5))
    caches = [KVCache(max_len=steps) for _ in range(layers)]
    for cache in caches:
        shape = (batch, heads, steps, dim)
        cache.append(rng.normal(size=shape).astype(np.float32), np.zeros(shape, np.float32))
    predicted = kv_cache_bytes(layers, batch, heads, steps, dim, bytes_per_element=4)
    assert cache_bytes(caches) == predicted == 2 * layers * batch * heads * steps * dim * 4
    assert kv_cache_bytes(layers, batch, heads, steps, dim, 8) == 2 * predicted
    return {"predicted": np.array(predicted), "measured": np.array(cache_bytes(caches))}


# %% nbgrader={"grade": true, "grade_id": "test-attention", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades="attention")
def test_cached_attention_equals_full_attention(rng):
    np.random.seed(int(rng.integers(1000)))
    attn = MultiHeadAttention(16, 4)
    x = rng.normal(size=(2, 7, 16)).astype(np.float32)
    with no_grad():
        full = attn(Tensor(x), causal_mask(7)).data
    cache = KVCache()
    parts = [cached_attention(attn, x[:, :3], cache, causal_mask(3)).data]  # the prompt
    parts += [cached_attention(attn, x[:, t : t + 1], cache).data for t in range(3, 7)]
    stepped = np.concatenate(parts, axis=1)
    assert len(cache) == 7
    np.testing.assert_allclose(stepped, full, rtol=1e-4, atol=1e-5)
    narrow = MultiHeadAttention(16, 4)  # two heads of width 4 kept: H * D = 8 < E = 16
    narrow.num_heads = 2
    narrow.q_proj, narrow.k_proj, narrow.v_proj = Linear(16, 8), Linear(16, 8), Linear(16, 8)
    narrow.out_proj = Linear(8, 16)
    cache = KVCache()
    pruned = [cached_attention(narrow, x[:, :3], cache, causal_mask(3)).data]
    pruned += [cached_attention(narrow, x[:, t : t + 1], cache).data for t in range(3, 7)]
    pruned = np.concatenate(pruned, axis=1)
    assert pruned.shape == (2, 7, 16)
    return {"out": stepped, "pruned": pruned}


# %% nbgrader={"grade": true, "grade_id": "test-generate", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades=("forward", "generate"))
def test_cached_generation_writes_the_uncached_tokens(rng):
    np.random.seed(int(rng.integers(1000)))
    gpt = GPT(vocab_size=20, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=8)
    for p in gpt.parameters():  # sharper than the init, so the logits differ by token
        p.data *= 10 if p.ndim == 2 else 1
    tokens = rng.integers(0, 20, size=(2, 5))
    with no_grad():
        full = gpt(tokens).data
    caches = new_caches(gpt)
    steps = [cached_forward(gpt, tokens[:, :2], caches).data]
    steps += [cached_forward(gpt, tokens[:, t : t + 1], caches).data for t in range(2, 5)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-4, atol=1e-4)
    greedy = cached_generate(gpt, tokens, max_new_tokens=6, temperature=0)  # slides past 8
    plain = gpt.generate(tokens, max_new_tokens=6, temperature=0, use_cache=False)
    np.testing.assert_array_equal(greedy, plain)
    sampled = cached_generate(gpt, tokens, max_new_tokens=6, temperature=1.0, seed=3)
    plain = gpt.generate(tokens, max_new_tokens=6, temperature=1.0, seed=3, use_cache=False)
    np.testing.assert_array_equal(sampled, plain)
    return {"greedy": greedy, "sampled": sampled}
