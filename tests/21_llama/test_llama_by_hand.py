"""Module 21 against a Llama computed by hand in numpy (float64), from the formulas of the papers
and of Meta's reference code, not from the lesson: grouped-query attention in which query head h
reads key/value head h // G, the pre-norm block and the whole model, with and without the cache.

The weights are drawn large enough that every part moves the output: a post-norm block, or query
heads paired with the wrong kv heads, miss these numbers by far more than the tolerance.
"""

import numpy as np
import pytest

from tinytorch.core.attention import causal_mask
from tinytorch.core.autograd import no_grad
from tinytorch.models.llama import GroupedQueryAttention, Llama, LlamaBlock, LlamaConfig

RTOL, ATOL = 1e-4, 1e-4  # the model runs in float32


def turned(x, positions, theta):
    """Rows x (..., T, D): pair (2k, 2k + 1) of position p, as the complex number
    x[2k] + i x[2k+1], times exp(i p theta^(-2k/D)) (RoFormer; Meta's `apply_rotary_emb`)."""
    half = x.shape[-1] // 2
    pairs = x.reshape(*x.shape[:-1], half, 2)
    z = pairs[..., 0] + 1j * pairs[..., 1]
    angle = np.outer(positions, theta ** (-2.0 * np.arange(half) / x.shape[-1]))  # (T, D/2)
    z = z * np.exp(1j * angle)
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape)


def attention_by_hand(x, p, heads, kv_heads, theta, start=0, kv_of=None):
    """Causal grouped-query attention of x (B, T, C) at positions start ..; p holds the (in, out)
    matrices by name. kv_of(h) is the kv head query head h reads, h // G unless given."""
    batch, steps, width = x.shape
    d, group = width // heads, heads // kv_heads
    kv_of = kv_of or (lambda h: h // group)
    where = np.arange(start, start + steps)

    def by_head(name, n):  # (B, T, n * d) -> (B, n, T, d)
        return (x @ p[name]).reshape(batch, steps, n, d).swapaxes(1, 2)

    q = turned(by_head("q_proj.weight", heads), where, theta)
    k = turned(by_head("k_proj.weight", kv_heads), where, theta)
    v = by_head("v_proj.weight", kv_heads)
    later = np.triu(np.ones((steps, steps), dtype=bool), 1)  # key after query
    heads_out = []
    for h in range(heads):
        s = np.einsum("btd,bsd->bts", q[:, h], k[:, kv_of(h)]) / np.sqrt(d)
        s = np.where(later, -np.inf, s)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        heads_out.append(np.einsum("bts,bsd->btd", e / e.sum(axis=-1, keepdims=True),
                                   v[:, kv_of(h)]))  # fmt: skip
    return np.concatenate(heads_out, axis=-1) @ p["out_proj.weight"]  # heads side by side


def rms_by_hand(x, scale, eps):
    return scale * x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps)


def swiglu_by_hand(x, p):
    gate = x @ p["w1.weight"]
    return (gate / (1 + np.exp(-gate)) * (x @ p["w3.weight"])) @ p["w2.weight"]


def inside(params: dict, prefix: str) -> dict:
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def block_by_hand(x, p, c: LlamaConfig):
    """Pre-norm: h = x + attention(rms(x)), out = h + swiglu(rms(h)), the norms' own scales."""
    kv_heads = c.num_kv_heads or c.num_heads
    normed = rms_by_hand(x, p["attention_norm.weight"], c.norm_eps)
    h = x + attention_by_hand(normed, inside(p, "attention."), c.num_heads, kv_heads, c.rope_theta)
    return h + swiglu_by_hand(rms_by_hand(h, p["ffn_norm.weight"], c.norm_eps),
                              inside(p, "feed_forward."))  # fmt: skip


def llama_by_hand(tokens, p, c: LlamaConfig):
    x = p["token_embedding.weight"][tokens]  # (B, T, C): no position vectors
    for i in range(c.num_layers):
        x = block_by_hand(x, inside(p, f"blocks.{i}."), c)
    x = rms_by_hand(x, p["norm.weight"], c.norm_eps)
    return x @ (p["token_embedding.weight"].T if c.tie_weights else p["lm_head.weight"])


def randomise(module, rng) -> dict:
    """Weights that move every output (norm scales around 1), as float64 arrays by name."""
    for name, param in module.named_parameters():
        if name.endswith("norm.weight"):
            param.data[...] = rng.uniform(0.5, 1.5, param.shape)
        else:
            param.data[...] = rng.normal(0, 1.5 / np.sqrt(param.shape[0]), param.shape)
    return {name: param.data.astype(np.float64) for name, param in module.named_parameters()}


@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (6, 3), (6, 2), (4, 1), (4, 4)])
def test_grouped_attention_equals_attention_computed_by_hand(rng, heads, kv_heads):
    """Query head h reads kv head h // G (G = heads / kv_heads), as Hugging Face's repeat_kv."""
    attn = GroupedQueryAttention(4 * heads, heads, kv_heads, max_seq_len=8, rope_theta=100.0)
    p = randomise(attn, rng)
    x = rng.normal(size=(2, 6, 4 * heads))
    with no_grad():
        got = attn(x.astype(np.float32), causal_mask(6), start=2).data
    want = attention_by_hand(x, p, heads, kv_heads, 100.0, start=2)
    tiled = attention_by_hand(x, p, heads, kv_heads, 100.0, start=2, kv_of=lambda h: h % kv_heads)
    which = ""
    if not np.allclose(want, tiled, rtol=RTOL, atol=ATOL) and np.allclose(
        got, tiled, rtol=RTOL, atol=ATOL
    ):
        which = f" (it pairs query head h with kv head h % {kv_heads}, as np.tile would)"
    np.testing.assert_allclose(
        got, want, rtol=RTOL, atol=ATOL,
        err_msg=f"GroupedQueryAttention.forward: query head h must read key/value head h // G, "
        f"G = num_heads / num_kv_heads = {heads // kv_heads}{which}",
    )  # fmt: skip


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_a_block_is_pre_norm(rng, kv_heads):
    config = LlamaConfig(20, 16, 1, 4, kv_heads, max_seq_len=8, multiple_of=8, rope_theta=500.0,
                         norm_eps=1e-5)  # fmt: skip
    block = LlamaBlock(config)
    p = randomise(block, rng)
    x = rng.normal(0.0, 2.0, size=(2, 7, 16))
    with no_grad():
        got = block(x.astype(np.float32), causal_mask(7)).data
    np.testing.assert_allclose(
        got, block_by_hand(x, p, config), rtol=RTOL, atol=ATOL,
        err_msg="LlamaBlock.forward: a pre-norm block adds attention(attention_norm(x)) to x, "
        "then feed_forward(ffn_norm(h)) to that sum h",
    )  # fmt: skip


@pytest.mark.parametrize("kv_heads, tie", [(2, False), (1, True), (4, False)])
def test_the_whole_model_equals_the_llama_computed_by_hand(rng, kv_heads, tie):
    model = Llama(20, 16, 2, 4, kv_heads, max_seq_len=8, multiple_of=8, rope_theta=500.0,
                  tie_weights=tie)  # fmt: skip
    p = randomise(model, rng)
    tokens = rng.integers(0, 20, (2, 8))
    want = llama_by_hand(tokens, p, model.config)
    assert np.abs(want).max() > 1  # logits that tell a wrong wiring apart
    with no_grad():
        got = model(tokens).data
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg="Llama.forward")


def test_a_chunk_after_the_cache_sees_the_cache_and_its_own_past(rng):
    """Several new tokens after cached ones: positions start .., and the causal mask that lets
    new token t see every cached key and the new keys up to t (causal_mask(T, past_len=start))."""
    model = Llama(20, 16, 2, 4, 2, max_seq_len=10, multiple_of=8, rope_theta=500.0)
    p = randomise(model, rng)
    tokens = rng.integers(0, 20, (2, 10))
    want = llama_by_hand(tokens, p, model.config)
    caches = model.new_caches()
    with no_grad():
        chunks = [model(tokens[:, a:b], caches).data for a, b in ((0, 3), (3, 6), (6, 7), (7, 10))]
    np.testing.assert_allclose(
        np.concatenate(chunks, axis=1), want, rtol=RTOL, atol=ATOL,
        err_msg="Llama.forward(tokens, caches): a chunk after a cache",
    )  # fmt: skip
