"""How big a GPT is: parameters counted and estimated from its sizes, and memory in bytes.

The one home of this arithmetic: the scaling and gpt milestones, module 14's FLOP count and
module 17's cache check read it here. Per block, attention has four `C x C` projections (`4C²`)
and the MLP two `C x 4C` ones (`8C²`), so a stack of `L` blocks holds about `12 L C²` weights;
the embeddings add `V C` (tokens) and `T_max C` (learned positions), an untied output projection
`C V`. `estimate_parameters` gives, from the sizes alone:

- `exact`: every parameter of GPT(config), biases and norms included (`count_parameters` of a
  built model equals it);
- `course`: the course's rule of thumb `12 L C² + V C` (matrices and the token embedding);
- `formula`: the weight matrices and every embedding, `12 L C² + V C (+ T_max C) (+ C V)`;
- `matmul`: the weights that take part in a matrix multiply per token, `L (4 C² + 2 C H) + C V`
  with `H` the MLP's width (the head, or the tied token embedding, is one multiply): the `P` of a
  training step's `6 P tokens` FLOPs;
- `per_block` and `embeddings`.

`estimate_memory` gives the float32 bytes of training (weights, gradients, Adam's moments,
activations, one layer's attention matrix) and of the KV cache.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson. Only numbers are read from the config,
so this file imports no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinytorch.core.layers import Module
    from tinytorch.models.transformer import GPTConfig


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
    return {"exact": exact, "formula": formula, "course": 12 * n * c * c + v * c,
            "matmul": n * (4 * c * c + 2 * c * hidden) + c * v,
            "per_block": attention + mlp + norms, "embeddings": embeddings}  # fmt: skip


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


__all__ = ["count_parameters", "estimate_parameters", "estimate_memory"]
