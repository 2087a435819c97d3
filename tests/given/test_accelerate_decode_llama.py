"""An accelerated Llama generates through tinytorch/accel/decode_llama.py: one numpy pass a
token on arrays prepared once a call. Its logits are module 21's step by step (grouped, multi-
and multi-query attention, tied or not, fused products or apart), its tokens module 21's for
every sampling option and a sliding window, and module 21's own steps run whenever a layer it
replaces is not on the fast path or a listener watches."""

import copy
import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.accel.accelerate import accelerate, plain
from tinytorch.accel.decode_llama import WholeTokenDecoder, _Generation, fits
from tinytorch.core.autograd import no_grad
from tinytorch.core.hooks import Listener, listen
from tinytorch.models.llama import Llama

decode_llama = importlib.import_module("tinytorch.accel.decode_llama")

KV_HEADS = [2, 4, 1]
KV_IDS = ["grouped", "multi-head", "multi-query"]


def sharp_llama(seed=0, kv_heads=2, **overrides):
    """Sharp weights, so the logits differ by token; RMSNorm weights that are not all 1."""
    np.random.seed(seed)
    config = dict(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, num_kv_heads=kv_heads,
                  max_seq_len=10, multiple_of=16)  # fmt: skip
    llama = Llama(**{**config, **overrides})
    for name, p in llama.named_parameters():
        if name.endswith("norm.weight"):
            p.data += np.linspace(-0.3, 0.3, p.size, dtype=p.dtype)
        else:
            p.data *= 20
    return llama


def lessons_tokens(llama, prompt, **kwargs):
    """Module 21's own `generate` with the cache, the whole-token path held off."""
    fast = vars(llama).pop("fast_generation")
    try:
        return llama.generate(prompt, **kwargs)
    finally:
        llama.fast_generation = fast


def must_not_run(*args, **kwargs):
    raise AssertionError("this path must not run here")


@pytest.mark.parametrize("fuse_bytes", [decode_llama.FUSE_BYTES, 0], ids=["fused", "apart"])
@pytest.mark.parametrize("tied", [False, True], ids=["own-head", "tied"])
@pytest.mark.parametrize("kv_heads", KV_HEADS, ids=KV_IDS)
def test_each_steps_logits_equal_module_21s_through_the_sliding_window(
    rng, kv_heads, tied, fuse_bytes, monkeypatch
):
    monkeypatch.setattr(decode_llama, "FUSE_BYTES", fuse_bytes)
    llama = accelerate(sharp_llama(5, kv_heads, tie_weights=tied), workers=1)
    tokens = rng.integers(0, 17, (2, 14))  # a prompt of 4, then one at a time past 10
    run, caches = _Generation(llama, 2, 10), llama.new_caches()
    assert [len(block.qkv) for block in run.blocks] == [1 if fuse_bytes else 3] * 2
    with no_grad():
        for end in range(4, 15):
            ours = run.next_logits(tokens[:, :end])
            theirs = llama._next_logits(tokens[:, :end], caches)
            assert ours.shape == (2, 17) and ours.dtype == np.float32
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert run.cached == 10  # the window's positions, refilled every step once it slid


@pytest.mark.parametrize("kv_heads", KV_HEADS, ids=KV_IDS)
def test_generate_writes_module_21s_tokens_for_every_sampling_option(kv_heads, monkeypatch):
    llama = accelerate(sharp_llama(2, kv_heads), workers=1)
    assert fits(llama) and llama.fast_generation.runs(llama)
    prompt = np.array([[5, 3, 8], [1, 1, 2]])
    steered = dict(temperature=0.9, top_p=0.8, repetition_penalty=1.4, seed=5)
    options = (dict(temperature=0), dict(temperature=1.0, seed=3), dict(top_k=4, seed=9),
               steered, dict(temperature=0, repetition_penalty=2.0),
               dict(temperature=0, stop_token=3), dict(top_k=3, top_p=0.7, seed=2))  # fmt: skip
    expected = [lessons_tokens(llama, prompt, max_new_tokens=15, **kw) for kw in options]
    monkeypatch.setattr(Llama, "_next_logits", must_not_run)  # module 21's steps stay out
    for kwargs, theirs in zip(options, expected):
        ours = llama.generate(prompt, max_new_tokens=15, **kwargs)  # slides past 10
        assert ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


@settings(max_examples=20, deadline=None)
@given(kv_heads=st.integers(1, 2), groups=st.integers(1, 3), half_dim=st.integers(1, 3),
       layers=st.integers(1, 2), context=st.integers(2, 7), batch=st.integers(1, 3),
       prompt=st.integers(1, 9), new=st.integers(0, 8), tied=st.booleans(),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_any_shape_generates_module_21s_tokens_and_logits(
    kv_heads, groups, half_dim, layers, context, batch, prompt, new, tied, seed
):
    heads = kv_heads * groups
    np.random.seed(seed)
    llama = Llama(vocab_size=11, embed_dim=heads * 2 * half_dim, num_layers=layers,
                  num_heads=heads, num_kv_heads=kv_heads, max_seq_len=context, multiple_of=4,
                  tie_weights=tied)  # fmt: skip
    for p in llama.parameters():
        p.data *= 20 if p.ndim == 2 else 1
    accelerate(llama, workers=1)
    assert fits(llama)
    tokens = np.random.default_rng(seed).integers(0, 11, (batch, prompt + new))
    run, caches = _Generation(llama, batch, min(context, prompt + new)), llama.new_caches()
    with no_grad():
        for end in range(prompt, prompt + new + 1):  # the prompt, then one at a time, sliding
            np.testing.assert_allclose(run.next_logits(tokens[:, :end]),
                                       llama._next_logits(tokens[:, :end], caches),
                                       rtol=1e-4, atol=1e-4)  # fmt: skip
    prompt_ids = tokens[:, :prompt]
    np.testing.assert_array_equal(llama.generate(prompt_ids, new, temperature=0),
                                  lessons_tokens(llama, prompt_ids, max_new_tokens=new,
                                                 temperature=0))  # fmt: skip


def test_generation_leaves_the_weights_and_the_caches_hold_what_the_call_reaches(monkeypatch):
    llama = accelerate(sharp_llama(8), workers=1)
    before = copy.deepcopy(llama.state_dict())
    made = []

    class Recorded(_Generation):
        def __init__(self, *args):
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(decode_llama, "_Generation", Recorded)
    llama.generate(np.array([[1, 2, 3]]), max_new_tokens=4, temperature=0)
    llama.generate(np.array([[1, 2, 3]]), max_new_tokens=30, temperature=0)
    assert [run.blocks[0].keys.shape[-1] for run in made] == [7, 10]  # prompt + new, at most 10
    for name, value in llama.state_dict().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_the_lessons_steps_run_when_a_layer_is_not_accelerated_or_a_listener_watches(monkeypatch):
    prompt = np.array([[4, 2]])
    partly = accelerate(sharp_llama(3), parts=("rmsnorm", "rotary", "embedding"), workers=1)
    assert not fits(partly)  # attention and SwiGLU stay the lesson's
    full = accelerate(sharp_llama(3), workers=1)
    want = lessons_tokens(full, prompt, max_new_tokens=6, temperature=0)
    monkeypatch.setattr(WholeTokenDecoder, "cached_generate", must_not_run)
    np.testing.assert_array_equal(partly.generate(prompt, 6, temperature=0), want)
    seen = []

    class Layers(Listener):
        def enter(self, module):
            seen.append(type(module).__name__)

    with listen(Layers()):
        assert not fits(full)
        np.testing.assert_array_equal(full.generate(prompt, 6, temperature=0), want)
    assert {"GroupedQueryAttention", "RMSNorm", "Linear"} <= set(seen)  # the profiler sees them
    np.testing.assert_array_equal(full.generate(prompt, 6, temperature=0, use_cache=False), want)


def test_accelerate_gives_a_llama_the_decoder_and_plain_takes_it_away():
    llama = accelerate(sharp_llama(1), workers=1)
    assert isinstance(llama.fast_generation, WholeTokenDecoder)
    plain(llama)
    assert "fast_generation" not in vars(llama) and not fits(llama)
    with pytest.raises(ValueError, match="not all accelerated: use model.generate"):
        WholeTokenDecoder().cached_generate(llama, np.array([[1]]), 2)
