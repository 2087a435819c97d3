"""Cached generation writes the tokens of recomputation: greedy, sampled, sliding, PyTorch."""

import numpy as np
import oracle
import pytest

from tinytorch.core.attention import MultiHeadAttention, causal_mask, padding_mask
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformer import GPT, Seq2SeqTransformer
from tinytorch.memo.decoder import cached_decode
from tinytorch.memo.generation import (
    cached_attention,
    cached_forward,
    cached_generate,
    new_caches,
)
from tinytorch.memo.kvcache import KVCache
from tinytorch.models.weights import load_torch_state_dict


def small_gpt(seed=0, **overrides):
    np.random.seed(seed)
    config = dict(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    gpt = GPT(**{**config, **overrides})
    for p in gpt.parameters():  # sharper than the N(0, 0.02) init, so logits differ by token
        p.data *= 20 if p.ndim == 2 else 1
    return gpt


def test_cached_self_attention_in_chunks_equals_the_full_layer(rng):
    np.random.seed(6)
    attn = MultiHeadAttention(16, 4)
    x = rng.normal(size=(2, 9, 16)).astype(np.float32)
    with no_grad():
        full = attn(Tensor(x), causal_mask(9)).data
    cache = KVCache()
    parts = [cached_attention(attn, x[:, :4], cache, causal_mask(4))]  # the prompt
    parts.append(cached_attention(attn, x[:, 4:6], cache, causal_mask(2, past_len=4)))
    parts += [cached_attention(attn, x[:, t : t + 1], cache) for t in range(6, 9)]
    assert len(cache) == 9 and cache.k.shape == (2, 4, 9, 4)
    assert attn.last_attention.shape == (2, 4, 1, 9)  # the newest query over every key
    np.testing.assert_allclose(np.concatenate([p.data for p in parts], 1), full, atol=1e-5)


def test_cached_cross_attention_projects_the_memory_once(rng):
    np.random.seed(7)
    attn = MultiHeadAttention(16, 4)
    x = rng.normal(size=(3, 6, 16)).astype(np.float32)
    memory = rng.normal(size=(3, 5, 16)).astype(np.float32)
    mask = padding_mask([5, 2, 0], 5)  # the last row may attend to nothing: zeros, not nan
    with no_grad():
        full = attn(Tensor(x), key=Tensor(memory), mask=mask).data
    cache = KVCache()
    steps = [cached_attention(attn, x[:, t : t + 1], cache, mask, memory=memory) for t in range(6)]
    assert len(cache) == 5  # projected on the first step, never appended again
    got = np.concatenate([s.data for s in steps], axis=1)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, full, atol=1e-5)


def test_the_cached_path_records_no_graph_with_grad_on():
    gpt = small_gpt()
    out = cached_forward(gpt, np.array([[1, 2, 3]]), new_caches(gpt))
    assert not out.requires_grad and out._ctx is None


@pytest.mark.parametrize(
    "overrides",
    [{}, {"tie_weights": True}, {"norm_first": False}, {"position": "sinusoidal"}],
    ids=["default", "tied", "post-norm", "sinusoidal"],
)
def test_cached_logits_equal_full_forward_logits(rng, overrides):
    gpt = small_gpt(seed=5, **overrides)
    tokens = rng.integers(0, 17, (2, 10))
    with no_grad():
        full = gpt(tokens).data
    caches = new_caches(gpt)
    pieces = [cached_forward(gpt, tokens[:, :4], caches).data]
    pieces += [cached_forward(gpt, tokens[:, t : t + 1], caches).data for t in range(4, 10)]
    assert [len(c) for c in caches] == [10, 10]
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="exceed max_seq_len=10"):
        cached_forward(gpt, tokens[:, :1], caches)


@pytest.mark.parametrize("overrides", [{}, {"tie_weights": True}, {"position": "sinusoidal"}])
def test_cached_generation_writes_the_uncached_tokens(overrides):
    gpt = small_gpt(seed=2, **overrides)
    prompt = np.array([[5, 3, 8], [1, 1, 2]])
    steered = dict(temperature=0.9, top_p=0.8, repetition_penalty=1.4, seed=5)
    for kwargs in (dict(temperature=0), dict(temperature=1.0, seed=3), dict(top_k=4, seed=9),
                   steered, dict(temperature=0, repetition_penalty=2.0),
                   dict(top_k=3, top_p=0.7, seed=2)):  # fmt: skip
        cached = cached_generate(gpt, prompt, max_new_tokens=15, **kwargs)  # slides past 10
        plain = gpt.generate(prompt, max_new_tokens=15, use_cache=False, **kwargs)
        assert cached.shape == (2, 18)
        np.testing.assert_array_equal(cached, plain)


def test_greedy_cached_tokens_equal_the_torch_reference():
    # TorchGPT.generate (tests/torch_reference.py, float64, its own KV cache) on sharp weights
    # drawn from a seed, committed by tests/torch_oracle/m17_memoization.py
    case = oracle.load(__file__).case("greedy")
    gpt = small_gpt(seed=4)
    load_torch_state_dict(gpt, oracle.torch_state(case))
    ours = cached_generate(gpt, case["prompt"], max_new_tokens=12, temperature=0)  # slides
    np.testing.assert_array_equal(ours, case["tokens"])


def test_a_prompt_longer_than_the_context_is_cropped_and_stop_tokens_pad():
    gpt = small_gpt(seed=1)
    prompt = np.arange(25).reshape(1, 25) % 17
    out = cached_generate(gpt, prompt, max_new_tokens=3, temperature=0)
    np.testing.assert_array_equal(out, gpt.generate(prompt, 3, temperature=0, use_cache=False))
    free = cached_generate(gpt, np.array([[1, 2], [3, 4]]), 8, temperature=0)
    stop = int(free[0, 2])
    out = cached_generate(gpt, np.array([[1, 2], [3, 4]]), 8, temperature=0, stop_token=stop)
    assert (out[0, 2:] == stop).all()
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        cached_generate(gpt, prompt, 3, temperature=-1)


def test_gpt_generate_uses_this_module_by_default(monkeypatch):
    import tinytorch.memo.generation as generation

    gpt = small_gpt()
    calls = []
    real = generation.cached_generate
    monkeypatch.setattr(
        generation, "cached_generate", lambda *a, **k: calls.append(k) or real(*a, **k)
    )
    prompt = np.array([[1, 2, 3]])
    default = gpt.generate(prompt, max_new_tokens=4, temperature=0)
    assert len(calls) == 1
    gpt.generate(prompt, max_new_tokens=4, temperature=0, use_cache=False)
    assert len(calls) == 1  # use_cache=False recomputes
    np.testing.assert_array_equal(default, gpt.generate(prompt, 4, temperature=0, use_cache=True))
    assert len(calls) == 2


def small_seq2seq(norm_first=True, seed=0):
    np.random.seed(seed)
    model = Seq2SeqTransformer(11, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=9,
                               norm_first=norm_first)  # fmt: skip
    for p in model.parameters():
        p.data *= 10 if p.ndim == 2 else 1
    return model


SOURCE = np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [5, 5, 6, 0, 0]])


@pytest.mark.parametrize("norm_first", [True, False])
def test_cached_decoding_writes_the_uncached_tokens(norm_first):
    model = small_seq2seq(norm_first, seed=2)
    mask = padding_mask([5, 2, 3], 5)
    for kwargs in (dict(), dict(temperature=1.5, top_k=5, seed=11), dict(stop_token=4)):
        cached = cached_decode(model, SOURCE, 1, 8, mask, **kwargs)
        plain = model.generate(SOURCE, 1, 8, mask, use_cache=False, **kwargs)
        np.testing.assert_array_equal(cached, plain)
    greedy = cached_decode(model, SOURCE, 1, 8, mask)
    prefix = np.ones((3, 1), dtype=np.int64)  # the plainest reference: full forward, argmax
    for _ in range(8):
        with no_grad():
            logits = model(SOURCE, prefix, source_mask=mask).data[:, -1]
        prefix = np.concatenate([prefix, logits.argmax(-1)[:, None]], axis=1)
    np.testing.assert_array_equal(greedy, prefix)
    with pytest.raises(ValueError, match="exceeds max_seq_len=9"):
        cached_decode(model, SOURCE, 1, 9, mask)


def test_a_layer_with_fewer_heads_than_the_width_caches_as_it_computes(rng):
    # module 16's PrunedAttention keeps H heads of width D with H * D < E: the merged heads are
    # H * D wide, not E (the lesson says so); the olympics generate from such a GPT with the cache
    np.random.seed(3)
    attn = MultiHeadAttention(12, 4)  # D = 3; keep two heads: H * D = 6
    attn.num_heads = 2
    attn.q_proj, attn.k_proj, attn.v_proj = Linear(12, 6), Linear(12, 6), Linear(12, 6)
    attn.out_proj = Linear(6, 12)
    x = rng.normal(size=(2, 5, 12)).astype(np.float32)

    def split(t):  # (B, T, 6) -> (B, 2, T, 3)
        return t.data.reshape(2, -1, 2, 3).transpose(0, 2, 1, 3)

    with no_grad():
        q, k, v = (split(p(Tensor(x))) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(3) + causal_mask(5)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(2, 5, 6)
    with no_grad():
        expected = attn.out_proj(Tensor(merged)).data
    cache = KVCache()
    parts = [cached_attention(attn, x[:, :2], cache, causal_mask(2)).data]
    parts += [cached_attention(attn, x[:, t : t + 1], cache).data for t in range(2, 5)]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
     ({"repetition_penalty": 0.0}, r"repetition_penalty must be > 0")],
)  # fmt: skip
def test_bad_steering_arguments_read_the_same_with_the_cache(kwargs, message):
    with pytest.raises(ValueError, match=message):
        small_gpt().generate(np.array([[1, 2]]), max_new_tokens=2, use_cache=True, **kwargs)
