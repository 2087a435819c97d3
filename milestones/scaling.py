"""Parameter, memory and speed reports: what the course's formulas predict against what we measure.

Two parameter formulas, stated precisely (d = embed_dim, L = num_layers, V = vocab_size,
T = max_seq_len, r = mlp_ratio = 4):

- the course formula `12·L·d² + V·d`: the attention projections (4·d² per layer) plus the MLP
  (2·r·d² = 8·d² per layer) plus the token embedding. It leaves out biases, layer norms, the
  position embedding and the output head, so it approximates the total.
- the exact count of this GPT, term by term:
  token embedding V·d; position embedding T·d;
  per layer: attention 4·d² + 4·d (q, k, v, out weights and biases), MLP 2·r·d² + r·d + d,
  two layer norms 4·d; final layer norm 2·d; output head d·V + V (weight and bias, not tied).
  It equals `count_parameters` of every model we build.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.models.transformer import GPT, count_parameters

FLOAT_BYTES = 4  # float32


@dataclass(frozen=True)
class Size:
    name: str
    num_layers: int
    embed_dim: int
    num_heads: int
    vocab_size: int
    max_seq_len: int


GPT_SIZES = (
    Size("gpt2-small", 12, 768, 12, 50257, 1024),
    Size("gpt2-medium", 24, 1024, 16, 50257, 1024),
    Size("gpt2-large", 36, 1280, 20, 50257, 1024),
    Size("gpt2-xl", 48, 1600, 25, 50257, 1024),
    Size("gpt3-175b", 96, 12288, 96, 50257, 2048),
)


def course_formula(s: Size) -> int:
    return 12 * s.num_layers * s.embed_dim**2 + s.vocab_size * s.embed_dim


def exact_formula(s: Size, mlp_ratio: int = 4) -> int:
    d, r, v = s.embed_dim, mlp_ratio, s.vocab_size
    per_layer = (4 * d * d + 4 * d) + (2 * r * d * d + r * d + d) + 4 * d
    return v * d + s.max_seq_len * d + s.num_layers * per_layer + 2 * d + d * v + v


def build(s: Size) -> GPT:
    return GPT(s.vocab_size, s.embed_dim, s.num_layers, s.num_heads, max_seq_len=s.max_seq_len)


def parameter_scaling(tiny: Size, build_limit: int) -> list[dict]:
    """Formula against exact count for the tiny model and the GPT sizes; build those within limit."""
    rows = []
    for s in (tiny, *GPT_SIZES):
        exact = exact_formula(s)
        built = count_parameters(build(s)) if exact <= build_limit else None
        rows.append(
            {
                "name": s.name,
                "num_layers": s.num_layers,
                "embed_dim": s.embed_dim,
                "num_heads": s.num_heads,
                "vocab_size": s.vocab_size,
                "max_seq_len": s.max_seq_len,
                "course_formula": course_formula(s),
                "exact_formula": exact,
                "built_count": built,
                "course_error": course_formula(s) / exact - 1.0,
            }
        )
    return rows


def by_component(model) -> dict[str, int]:
    """Parameter counts grouped: embeddings, attention, MLP, layer norms, output head."""
    groups: dict[str, int] = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        key = parts[2] if parts[0] == "blocks" and len(parts) > 2 else parts[0]
        if key.startswith(("ln", "norm")):
            key = "layer norms"
        groups[key] = groups.get(key, 0) + int(p.data.size)
    return groups


def attention_memory(
    num_heads: int, contexts: tuple[int, ...], batch: int = 1, embed_dim: int = 64
) -> list[dict]:
    """Attention-matrix bytes per layer: B·H·T²·4 predicted, `last_attention.nbytes` measured."""
    model = GPT(32, embed_dim, 1, num_heads, max_seq_len=max(contexts))
    model.eval()
    rng = np.random.default_rng(0)
    rows = []
    for t in contexts:
        with no_grad():
            model(Tensor(rng.integers(0, 32, size=(batch, t))))
        measured = int(model.blocks[0].attention.last_attention.nbytes)
        predicted = batch * num_heads * t * t * FLOAT_BYTES
        rows.append({"context": t, "predicted_bytes": predicted, "measured_bytes": measured})
    return rows


def kv_cache_bytes_per_token(s: Size) -> int:
    """Keys and values of every layer for one more token of one sequence: 2·L·d·4 bytes."""
    return 2 * s.num_layers * s.embed_dim * FLOAT_BYTES


def training_memory(params: int, activation_bytes: int) -> dict[str, int]:
    """Weights, gradients and AdamW's two moments (4 bytes each per parameter), and activations."""
    weights = params * FLOAT_BYTES
    return {
        "weights": weights,
        "gradients": weights,
        "adam_state": 2 * weights,
        "activations": activation_bytes,
        "total": 4 * weights + activation_bytes,
    }


def activation_estimate(s: Size, batch: int, context: int, mlp_ratio: int = 4) -> int:
    """Bytes of the tensors a forward keeps for backward, per the usual per-layer count.

    Per layer: about (10 + 2·r)·B·T·d values for the residual stream, norms, q, k, v, projections
    and the MLP, plus 2·B·H·T² for the attention scores and weights; then the logits B·T·V twice.
    """
    b, t, d = batch, context, s.embed_dim
    per_layer = (10 + 2 * mlp_ratio) * b * t * d + 2 * b * s.num_heads * t * t
    return (s.num_layers * per_layer + 2 * b * t * s.vocab_size) * FLOAT_BYTES


def generation_speed(model, prompt: np.ndarray, new_tokens: int) -> dict[str, float]:
    """Tokens per second of greedy generation with and without the KV cache, measured."""
    speeds = {}
    for use_cache in (False, True):
        began = time.perf_counter()
        model.generate(prompt, max_new_tokens=new_tokens, temperature=0.0, use_cache=use_cache)
        speeds["with_cache" if use_cache else "without_cache"] = new_tokens / (
            time.perf_counter() - began
        )
    speeds["speedup"] = speeds["with_cache"] / speeds["without_cache"]
    speeds["new_tokens"] = new_tokens
    return speeds
