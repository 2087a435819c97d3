"""Parameter, memory and speed reports: what the course's formulas predict against what we measure.

The arithmetic is tinytorch/models/scaling.py's, read here, never redone. Its two parameter
formulas (`estimate_parameters`'s "course" and "exact"), stated precisely (d = embed_dim,
L = num_layers, V = vocab_size, T = max_seq_len, r = mlp_ratio = 4):

- the course formula `12·L·d² + V·d`: the attention projections (4·d² per layer) plus the MLP
  (2·r·d² = 8·d² per layer) plus the token embedding. It leaves out biases, layer norms, the
  position embedding and the output head, so it approximates the total.
- the exact count of this GPT, term by term:
  token embedding V·d; position embedding T·d;
  per layer: attention 4·d² + 4·d (q, k, v, out weights and biases), MLP 2·r·d² + r·d + d,
  two layer norms 4·d; final layer norm 2·d; output head d·V + V (weight and bias), or 0 when
  the head is tied to the token embedding (the GPT-2 and GPT-3 presets tie it).
  It equals `count_parameters` of every model we build (and `estimate_parameters(...)["exact"]`).
"""

from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.models.scaling import count_parameters, estimate_memory, estimate_parameters
from tinytorch.models.transformer import GPT, PRESETS, GPTConfig

GPT_SIZES = ("gpt2-small", "gpt2-medium", "gpt2-large", "gpt3")  # names in PRESETS


def course_formula(c: GPTConfig) -> int:
    """The course's rule of thumb, 12·L·d² + V·d (tinytorch/models/scaling.py)."""
    return estimate_parameters(c)["course"]


def exact_formula(c: GPTConfig) -> int:
    """Every parameter of GPT(c), from its sizes (tinytorch/models/scaling.py)."""
    return estimate_parameters(c)["exact"]


def parameter_scaling(this: GPTConfig, build_limit: int) -> list[dict]:
    """Both formulas for this model and the GPT presets; those within `build_limit` are built."""
    rows = []
    for name, c in (("this model", this), *((n, PRESETS[n]) for n in GPT_SIZES)):
        exact = exact_formula(c)
        built = count_parameters(GPT.from_config(c)) if exact <= build_limit else None
        rows.append(
            {
                "name": name,
                **asdict(c),
                "course_formula": course_formula(c),
                "exact_formula": exact,
                "built_count": built,
                "course_error": course_formula(c) / exact - 1.0,
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
    num_heads: int, seq_lens: tuple[int, ...], batch: int = 1, embed_dim: int = 64
) -> list[dict]:
    """Attention-matrix bytes per layer: B·H·T²·4 predicted, `last_attention.nbytes` measured."""
    model = GPT(32, embed_dim, 1, num_heads, max_seq_len=max(seq_lens))
    model.eval()
    rng = np.random.default_rng(0)
    rows = []
    for t in seq_lens:
        with no_grad():
            model(Tensor(rng.integers(0, 32, size=(batch, t))))
        measured = int(model.blocks[0].attention.last_attention.nbytes)
        predicted = estimate_memory(model.config, batch, t)["attention"]
        rows.append({"seq_len": t, "predicted_bytes": predicted, "measured_bytes": measured})
    return rows


def kv_cache_bytes_per_token(c: GPTConfig) -> int:
    """Keys and values of every layer for one more token of one sequence: 2·L·d·4 bytes."""
    return estimate_memory(c, batch_size=1, seq_len=1)["kv_cache"]


def measured_kv_bytes_per_token(model: GPT, tokens: int = 8) -> float:
    """Bytes the model's KV caches hold after reading `tokens` tokens of one sequence, per token."""
    from tinytorch.memo.generation import cached_forward, new_caches  # module 17

    caches = new_caches(model)  # one KVCache per block
    cached_forward(model, np.zeros((1, tokens), dtype=np.int64), caches)
    return sum(c.k.nbytes + c.v.nbytes for c in caches) / tokens


def training_memory(config: GPTConfig, batch: int, measured: dict[str, int]) -> dict:
    """`estimate_memory`'s prediction beside bytes measured on the arrays of a training step."""
    est = estimate_memory(config, batch, config.max_seq_len)
    predicted = {
        "weights": est["weights"],
        "gradients": est["gradients"],
        "adam_state": est["adam"],
        "activations": est["activations"],
    }
    predicted["total"] = sum(predicted.values())
    measured = {**measured, "total": sum(measured.values())}
    return {"measured": measured, "predicted": predicted}


def generation_speed(model, prompt: np.ndarray, new_tokens: int) -> dict[str, float]:
    """Tokens per second of greedy generation with and without the KV cache, measured;
    `one_pass`: the cached steps ran in module 18's one numpy pass a token, not module 17's
    layer calls, so the speedup is both modules'."""
    speeds = {}
    for use_cache in (False, True):
        began = time.perf_counter()
        model.generate(prompt, max_new_tokens=new_tokens, temperature=0.0, use_cache=use_cache)
        speeds["with_cache" if use_cache else "without_cache"] = new_tokens / (
            time.perf_counter() - began
        )
    speeds["speedup"] = speeds["with_cache"] / speeds["without_cache"]
    speeds["new_tokens"] = new_tokens
    fast = getattr(model, "fast_generation", None)  # accelerate's whole-token path
    speeds["one_pass"] = fast is not None and fast.runs(model)
    return speeds
