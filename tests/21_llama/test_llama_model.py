"""Grouped-query attention and the Llama: causality, the KV cache, generation, sizes, errors."""

import re

import numpy as np
import pytest
from fdcheck import check_graph

from tinytorch.core.attention import causal_mask
from tinytorch.core.autograd import no_grad
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.memo.kvcache import cache_bytes, kv_cache_bytes
from tinytorch.models.llama import GroupedQueryAttention, Llama, LlamaConfig, llama_config
from tinytorch.models.transformer import PRESETS
from tinytorch.nn.llama import RMSNorm, SwiGLU


def small_llama(**changes):
    np.random.seed(0)
    sizes = dict(vocab_size=20, embed_dim=16, num_layers=2, num_heads=4, num_kv_heads=2,
                 max_seq_len=8, multiple_of=8)  # fmt: skip
    model = Llama(**{**sizes, **changes})
    for p in model.parameters():  # sharper than the init, so the logits differ by token
        p.data *= 5 if p.ndim == 2 else 1
    return model


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_attention_gradients_pass_finite_differences(rng, kv_heads):
    np.random.seed(1)
    attn = GroupedQueryAttention(8, num_heads=4, num_kv_heads=kv_heads, max_seq_len=8)
    weights = [attn.q_proj.weight.data, attn.k_proj.weight.data, attn.v_proj.weight.data,
               attn.out_proj.weight.data]  # fmt: skip

    def build(x, wq, wk, wv, wo):
        attn.q_proj.weight, attn.k_proj.weight = wq, wk
        attn.v_proj.weight, attn.out_proj.weight = wv, wo
        return attn(x, causal_mask(5), start=2)

    check_graph(build, rng.normal(size=(2, 5, 8)), *weights)


def test_kv_heads_shrink_the_projections_and_the_cache(rng):
    x = rng.normal(size=(1, 6, 32)).astype(np.float32)
    measured = {}
    for kv_heads in (1, 2, 8):
        attn = GroupedQueryAttention(32, num_heads=8, num_kv_heads=kv_heads)
        assert attn.k_proj.weight.shape == attn.v_proj.weight.shape == (32, 4 * kv_heads)
        model = Llama(16, 32, 3, 8, num_kv_heads=kv_heads, max_seq_len=6)
        caches = model.new_caches()
        model(rng.integers(0, 16, (1, 6)), caches)
        assert caches[0].k.shape == (1, kv_heads, 6, 4)
        measured[kv_heads] = cache_bytes(caches)
        assert measured[kv_heads] == kv_cache_bytes(3, 1, kv_heads, 6, 4)
        assert attn(Tensor(x), causal_mask(6)).shape == (1, 6, 32)
    assert measured[8] == 8 * measured[1] == 4 * measured[2]


def test_one_kv_head_per_query_head_is_multi_head_attention(rng):
    """num_kv_heads = num_heads: each query head has its own keys, as in module 12."""
    np.random.seed(0)
    attn = GroupedQueryAttention(8, num_heads=2, num_kv_heads=2, max_seq_len=4)
    x = rng.normal(size=(1, 4, 8)).astype(np.float32)
    out = attn(Tensor(x), causal_mask(4)).data
    q = attn.rotary(Tensor((x @ attn.q_proj.weight.data).reshape(1, 4, 2, 4).transpose(0, 2, 1, 3)))
    k = attn.rotary(Tensor((x @ attn.k_proj.weight.data).reshape(1, 4, 2, 4).transpose(0, 2, 1, 3)))
    v = (x @ attn.v_proj.weight.data).reshape(1, 4, 2, 4).transpose(0, 2, 1, 3)
    scores = q.data @ k.data.swapaxes(-1, -2) / 2 + causal_mask(4)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    want = (w @ v).transpose(0, 2, 1, 3).reshape(1, 4, 8) @ attn.out_proj.weight.data
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-6)


def test_attention_is_causal_through_the_callers_mask_only(rng):
    """As module 12's MultiHeadAttention: mask=None sees every position, the mask hides later."""
    np.random.seed(2)
    attn = GroupedQueryAttention(8, num_heads=4, num_kv_heads=2, max_seq_len=6)
    x = rng.normal(size=(1, 6, 8)).astype(np.float32)
    changed = x.copy()
    changed[:, -1] += 1.0  # only the last position differs
    with no_grad():
        masked = [attn(Tensor(a), causal_mask(6)).data for a in (x, changed)]
        unmasked = [attn(Tensor(a)).data for a in (x, changed)]
    np.testing.assert_array_equal(masked[0][:, :5], masked[1][:, :5])
    assert (np.abs(unmasked[0][:, :5] - unmasked[1][:, :5]) > 1e-6).all(axis=-1).all()


def test_settings_that_would_give_nans_are_one_clear_error_at_config_time():
    for changes, message in (
        ({"rope_theta": 0}, "rope_theta must be a positive number, got 0"),
        ({"rope_theta": -1.0}, "rope_theta must be a positive number, got -1.0"),
        ({"norm_eps": -1e-5}, "norm_eps must be >= 0, got -1e-05"),
        ({"multiple_of": 0}, "multiple_of must be a positive integer, got 0"),
        ({"hidden_dim": 0}, "hidden_dim must be a positive integer, got 0"),
    ):
        with pytest.raises(ValueError, match=f"^Llama: {re.escape(message)}$"):
            Llama(10, 16, 1, 4, **changes)
        with pytest.raises(ValueError, match=re.escape(message)):
            llama_config("nano", **changes)
    with pytest.raises(ValueError, match="positive base theta, got 0"):
        GroupedQueryAttention(16, 4, rope_theta=0)
    with pytest.raises(ValueError, match="eps must be >= 0"):
        RMSNorm(4, eps=-1)
    with pytest.raises(ValueError, match="multiple_of must be a positive integer, got 0"):
        SwiGLU(8, multiple_of=0)
    assert Llama(10, 16, 1, 4, norm_eps=0.0).config.norm_eps == 0.0  # no eps is allowed


def test_wrong_kv_head_counts_are_one_clear_error():
    with pytest.raises(
        ValueError, match=r"num_kv_heads=3 does not divide num_heads=4.*\[1, 2, 4\]"
    ):
        GroupedQueryAttention(16, 4, 3)
    with pytest.raises(ValueError, match="num_kv_heads must be a positive integer"):
        Llama(10, 16, 1, 4, num_kv_heads=0.5)
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        Llama(10, 16, 1, 3)
    with pytest.raises(ShapeError, match=r"\(batch, seq_len, 16\)"):
        GroupedQueryAttention(16, 4)(np.ones((2, 16)))


def test_llama_is_causal_and_has_no_biases(rng):
    model = small_llama()
    assert not [n for n, _ in model.named_parameters() if n.endswith("bias")]
    tokens = rng.integers(0, 20, (2, 6))
    logits = model(tokens).data
    changed = tokens.copy()
    changed[:, 4:] = 0
    np.testing.assert_allclose(model(changed).data[:, :4], logits[:, :4], atol=1e-5)
    assert np.abs(model(changed).data[:, 4:] - logits[:, 4:]).max() > 1e-3


def test_cached_forward_equals_the_full_forward(rng):
    model = small_llama()
    tokens = rng.integers(0, 20, (2, 8))
    with no_grad():
        full = model(tokens).data
        caches = model.new_caches()
        steps = [model(tokens[:, :3], caches).data]
        steps += [model(tokens[:, t : t + 1], caches).data for t in range(3, 8)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-4, atol=1e-4)
    with pytest.raises(ShapeError, match="8 cached \\+ 1 new positions exceed max_seq_len=8"):
        model(tokens[:, :1], caches)


def test_a_cache_for_each_block_or_one_clear_error(rng):
    model = small_llama()  # 2 blocks
    tokens = rng.integers(0, 20, (1, 4))
    for caches in (model.new_caches()[:1], model.new_caches() + model.new_caches()[:1], []):
        with pytest.raises(ShapeError, match=f"^Llama.forward got {len(caches)} caches for 2 "):
            with no_grad():
                model(tokens, caches)


def test_caches_are_for_inference_and_a_backward_through_them_says_so(rng):
    """Module 17's caches keep keys and values as arrays: no gradient reaches k_proj or v_proj
    through them, so the logits of a cached forward refuse a backward instead of training
    half the attention."""
    model = small_llama()
    tokens = rng.integers(0, 20, (2, 6))
    with no_grad():
        want = model(tokens).data
    caches = model.new_caches()
    first = model(tokens[:, :3], caches)  # gradients on: the values are the same
    logits = model(tokens[:, 3:], caches)
    np.testing.assert_allclose(np.concatenate([first.data, logits.data], axis=1), want,
                               rtol=1e-4, atol=1e-4)  # fmt: skip
    loss = cross_entropy(logits, rng.integers(0, 20, (2, 3)))
    with pytest.raises(RuntimeError, match=r"^backward\(\) through Llama\.forward\(tokens, caches"):
        loss.backward()
    assert all(p.grad is None for p in model.parameters())
    cross_entropy(model(tokens), rng.integers(0, 20, (2, 6))).backward()  # no caches: trains
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("kv_heads", [1, 4])
def test_generation_writes_the_same_tokens_with_and_without_the_cache(rng, kv_heads):
    model = small_llama(num_kv_heads=kv_heads)
    prompt = rng.integers(0, 20, (3, 4))
    steered = {"temperature": 0.8, "seed": 2, "top_p": 0.9, "repetition_penalty": 1.3}
    for kwargs in ({"temperature": 0}, {"temperature": 1.0, "seed": 5, "top_k": 5}, steered):
        cached = model.generate(prompt, max_new_tokens=9, **kwargs)  # slides past 8
        plain = model.generate(prompt, max_new_tokens=9, use_cache=False, **kwargs)
        assert cached.shape == (3, 13)
        np.testing.assert_array_equal(cached, plain)
        np.testing.assert_array_equal(cached[:, :4], prompt)


def test_generation_stops_every_row_at_the_stop_token(rng):
    model = small_llama()
    prompt = rng.integers(0, 20, (2, 3))
    free = model.generate(prompt, max_new_tokens=6, temperature=0)
    stop = int(free[0, 4])
    out = model.generate(prompt, max_new_tokens=6, temperature=0, stop_token=stop)
    assert (out[0, 4:] == stop).all()
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        model.generate(prompt, temperature=-1)
    for use_cache in (True, False):  # a number is required, not None
        with pytest.raises(ValueError, match="temperature must be >= 0.*got None"):
            model.generate(prompt, temperature=None, use_cache=use_cache)


def test_tied_weights_share_the_embedding(rng):
    model = small_llama(tie_weights=True)
    assert model.lm_head is None
    tokens = rng.integers(0, 20, (1, 5))
    cross_entropy(model(tokens), rng.integers(0, 20, (1, 5))).backward()
    assert model.token_embedding.weight.grad is not None
    assert len(model.parameters()) == len(small_llama().parameters()) - 1


def test_presets_come_from_the_one_size_table():
    model = Llama.from_config("nano", num_kv_heads=1)
    size = PRESETS["nano"]
    assert model.config.embed_dim == size.embed_dim and len(model.blocks) == size.num_layers
    assert model.config.num_kv_heads == 1 and model.max_seq_len == size.max_seq_len
    again = Llama.from_config(model.config)
    assert again.config == model.config
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        Llama.from_config("huge")
    config = LlamaConfig(32, 16, 1, 2)
    assert Llama.from_config(config, num_kv_heads=1).config.num_kv_heads == 1


def test_a_small_llama_learns_a_repeating_sequence(rng):
    np.random.seed(0)
    model = Llama(8, 32, 2, 4, num_kv_heads=2, max_seq_len=16, multiple_of=16)
    data = np.tile(np.arange(8), 4)[None]
    x, y = data[:, :16], data[:, 1:17]
    opt = AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    for _ in range(40):
        loss = cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
    out = model.generate(data[:, :4], max_new_tokens=8, temperature=0)
    np.testing.assert_array_equal(out[0], np.tile(np.arange(8), 2)[:12])


def test_whole_model_gradients_pass_finite_differences(rng):
    model = small_llama(vocab_size=10, embed_dim=8, num_layers=1, num_heads=2, num_kv_heads=1)
    tokens = rng.integers(0, 10, (1, 4))
    params = model.parameters()

    # every parameter swapped for the tensor the check differentiates
    def build_tensors(*tensors):
        for holder, t in zip(_holders(model), tensors):
            setattr(holder[0], holder[1], t)
        return model(tokens)

    arrays = [p.data.astype(np.float64) for p in params]
    check_graph(build_tensors, *arrays, rtol=1e-4, atol=1e-6)


def _holders(model):
    """(object, attribute) of every parameter, in parameters() order."""
    found = []
    found.append((model.token_embedding, "weight"))
    for block in model.blocks:
        found.append((block.attention_norm, "weight"))
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            found.append((getattr(block.attention, name), "weight"))
        found.append((block.ffn_norm, "weight"))
        for name in ("w1", "w3", "w2"):
            found.append((getattr(block.feed_forward, name), "weight"))
    found.append((model.norm, "weight"))
    found.append((model.lm_head, "weight"))
    return found


def test_holders_follow_the_parameter_order():
    model = small_llama()
    assert [getattr(o, a) for o, a in _holders(model)] == model.parameters()
