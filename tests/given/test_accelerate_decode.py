"""An accelerated GPT generates through tinytorch/accel/decode.py: one numpy pass a token on
arrays prepared once a call. Its logits are module 17's step by step, its tokens module 17's
for every sampling option and a sliding window, and module 17 runs instead whenever a layer it
replaces is not on module 18's fast path or a listener watches."""

import copy
import importlib
import pickle
from pathlib import Path

import numpy as np
import oracle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.accel.accelerate import accelerate, plain
from tinytorch.accel.decode import WholeTokenDecoder, _Generation, fits
from tinytorch.core.autograd import no_grad
from tinytorch.core.hooks import Listener, listen
from tinytorch.memo.generation import _next_logits, cached_generate, new_caches
from tinytorch.models.transformer import GPT
from tinytorch.models.weights import load_torch_state_dict

decode = importlib.import_module("tinytorch.accel.decode")
generation = importlib.import_module("tinytorch.memo.generation")

SHAPES = [{}, {"tie_weights": True}, {"norm_first": False}, {"position": "sinusoidal"}]
SHAPE_IDS = ["default", "tied", "post-norm", "sinusoidal"]


def sharp_gpt(seed=0, **overrides):
    """module 17's test model: sharp weights, so the logits differ by token."""
    np.random.seed(seed)
    config = dict(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    gpt = GPT(**{**config, **overrides})
    for p in gpt.parameters():
        p.data *= 20 if p.ndim == 2 else 1
    for name, p in gpt.named_parameters():  # LayerNorms that are not the identity
        if name.endswith((".gamma", ".beta")):
            p.data += np.linspace(-0.3, 0.3, p.size, dtype=p.dtype)
    return gpt


def must_not_run(*args, **kwargs):
    raise AssertionError("this path must not run here")


@pytest.mark.parametrize("fuse_bytes", [decode.FUSE_BYTES, 0], ids=["qkv-fused", "qkv-apart"])
@pytest.mark.parametrize("overrides", SHAPES, ids=SHAPE_IDS)
def test_each_steps_logits_equal_module_17s_through_the_sliding_window(
    rng, overrides, fuse_bytes, monkeypatch
):
    monkeypatch.setattr(decode, "FUSE_BYTES", fuse_bytes)  # GPT-2 small's blocks: three products
    gpt = accelerate(sharp_gpt(seed=5, **overrides), workers=1)
    tokens = rng.integers(0, 17, (2, 14))  # a prompt of 4, then one at a time past 10
    run, caches = _Generation(gpt, 2, 10), new_caches(gpt)
    assert [len(block.qkv) for block in run.blocks] == [1 if fuse_bytes else 3] * 2
    with no_grad():
        for end in range(4, 15):
            ours = run.next_logits(tokens[:, :end])
            theirs = _next_logits(gpt, tokens[:, :end], caches)
            assert ours.shape == (2, 17) and ours.dtype == np.float32
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert run.cached == 10  # the window's positions, refilled every step once it slid


@pytest.mark.parametrize("overrides", SHAPES, ids=SHAPE_IDS)
def test_generate_writes_module_17s_tokens_for_every_sampling_option(overrides, monkeypatch):
    gpt = accelerate(sharp_gpt(seed=2, **overrides), workers=1)
    assert fits(gpt)
    prompt = np.array([[5, 3, 8], [1, 1, 2]])
    steered = dict(temperature=0.9, top_p=0.8, repetition_penalty=1.4, seed=5)
    options = (dict(temperature=0), dict(temperature=1.0, seed=3), dict(top_k=4, seed=9),
               steered, dict(temperature=0, repetition_penalty=2.0),
               dict(top_k=3, top_p=0.7, seed=2))  # fmt: skip
    expected = [cached_generate(gpt, prompt, max_new_tokens=15, **kw) for kw in options]
    monkeypatch.setattr(generation, "cached_forward", must_not_run)  # module 17 stays out
    for kwargs, theirs in zip(options, expected):
        ours = gpt.generate(prompt, max_new_tokens=15, **kwargs)  # slides past 10
        assert ours.shape == (2, 18)
        np.testing.assert_array_equal(ours, theirs)


@settings(max_examples=20, deadline=None)
@given(heads=st.integers(1, 3), head_dim=st.integers(1, 5), layers=st.integers(1, 2),
       context=st.integers(2, 7), batch=st.integers(1, 3), prompt=st.integers(1, 9),
       new=st.integers(0, 8), ratio=st.sampled_from([1, 2.5, 4]), tied=st.booleans(),
       post_norm=st.booleans(), seed=st.integers(0, 2**16))  # fmt: skip
def test_any_shape_generates_module_17s_tokens_and_logits(
    heads, head_dim, layers, context, batch, prompt, new, ratio, tied, post_norm, seed
):
    np.random.seed(seed)
    gpt = GPT(vocab_size=11, embed_dim=heads * head_dim, num_layers=layers, num_heads=heads,
              max_seq_len=context, mlp_ratio=ratio, tie_weights=tied,
              norm_first=not post_norm)  # fmt: skip
    for p in gpt.parameters():
        p.data *= 20 if p.ndim == 2 else 1
    accelerate(gpt, workers=1)
    assert fits(gpt)
    tokens = np.random.default_rng(seed).integers(0, 11, (batch, prompt + new))
    run, caches = _Generation(gpt, batch, min(context, prompt + new)), new_caches(gpt)
    with no_grad():
        for end in range(prompt, prompt + new + 1):  # the prompt, then one at a time, sliding
            np.testing.assert_allclose(run.next_logits(tokens[:, :end]),
                                       _next_logits(gpt, tokens[:, :end], caches),
                                       rtol=1e-4, atol=1e-4)  # fmt: skip
    prompt_ids = tokens[:, :prompt]
    np.testing.assert_array_equal(gpt.generate(prompt_ids, new, temperature=0),
                                  cached_generate(gpt, prompt_ids, new, temperature=0))  # fmt: skip


def test_the_caches_hold_the_positions_the_call_can_reach(monkeypatch):
    gpt = accelerate(sharp_gpt(seed=8), workers=1)
    made = []

    class Recorded(_Generation):
        def __init__(self, *args):
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(decode, "_Generation", Recorded)
    for prompt_len, new, longest in ((3, 4, 7), (3, 20, 10), (14, 2, 10)):
        gpt.generate(np.ones((2, prompt_len), dtype=int), new, temperature=0)
        keys, values = made[-1].blocks[0].keys, made[-1].blocks[0].values
        assert keys.shape == (2, 4, 4, longest) and values.shape == (2, 4, longest, 4)


def test_stop_tokens_pad_and_bad_arguments_read_as_module_17s(monkeypatch):
    gpt = accelerate(sharp_gpt(seed=1), workers=1)
    prompt = np.array([[1, 2], [3, 4]])
    free = cached_generate(gpt, prompt, 8, temperature=0)
    stop = int(free[0, 2])
    expected = cached_generate(gpt, prompt, 8, temperature=0, stop_token=stop)
    monkeypatch.setattr(generation, "cached_forward", must_not_run)
    ours = gpt.generate(prompt, 8, temperature=0, stop_token=stop)
    np.testing.assert_array_equal(ours, expected)
    assert (ours[0, 2:] == stop).all()
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        gpt.generate(prompt, 3, temperature=-1)
    with pytest.raises(ValueError, match="temperature must be >= 0.*got None"):
        gpt.generate(prompt, 3, temperature=None)
    with pytest.raises(ValueError, match="out of range|vocab"):
        gpt.generate(np.array([[1, 99]]), 3)


def test_greedy_tokens_equal_the_torch_reference():
    # the case module 17's test reads: TorchGPT.generate in float64 on sharp weights
    m17 = Path(__file__).parents[1] / "17_memoization" / "test_memoization_generate.py"
    case = oracle.load(m17).case("greedy")
    np.random.seed(4)
    gpt = GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    load_torch_state_dict(gpt, oracle.torch_state(case))
    accelerate(gpt, workers=1)
    assert fits(gpt)
    ours = gpt.generate(case["prompt"], max_new_tokens=12, temperature=0)  # slides
    np.testing.assert_array_equal(ours, case["tokens"])


def test_the_weights_stay_as_they_were_and_the_attention_keeps_its_last_weights():
    gpt = accelerate(sharp_gpt(seed=3), workers=1)
    before = {k: v.copy() for k, v in gpt.state_dict().items()}
    ours = gpt.generate(np.array([[4, 5, 6]]), 4, temperature=0)
    after = gpt.state_dict()
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value)
    fast = [block.attention.last_attention for block in gpt.blocks]
    theirs = cached_generate(gpt, np.array([[4, 5, 6]]), 4, temperature=0)
    np.testing.assert_array_equal(ours, theirs)
    for block, weights in zip(gpt.blocks, fast):
        assert weights.shape == (1, 4, 1, 6)  # the last query over the 6 positions it saw
        np.testing.assert_allclose(weights, block.attention.last_attention, atol=1e-5)
        np.testing.assert_allclose(weights.sum(axis=-1), 1, rtol=1e-5)


def lesson_parts_only():
    return accelerate(sharp_gpt(), parts=("gelu", "layernorm", "embedding"), workers=1)


def listened():
    return accelerate(sharp_gpt(), workers=1)


class OwnGPT(GPT):
    """A student's subclass: its forward may differ, so the whole-token path must not run."""


def own_subclass():
    np.random.seed(0)
    return accelerate(OwnGPT(17, 16, 2, 4, max_seq_len=10), workers=1)


@pytest.mark.parametrize("build", [lesson_parts_only, own_subclass, listened],
                         ids=["attention-not-accelerated", "subclass", "listener"])  # fmt: skip
def test_module_17_runs_when_a_layer_is_not_on_the_fast_path_or_a_listener_watches(
    build, monkeypatch
):
    gpt = build()
    assert isinstance(gpt.fast_generation, WholeTokenDecoder)
    prompt = np.array([[1, 2, 3]])
    expected = cached_generate(gpt, prompt, 5, temperature=0)
    monkeypatch.setattr(decode, "_Generation", must_not_run)
    seen = []

    class Layers(Listener):
        def enter(self, module):
            seen.append(type(module).__name__)

    if build is listened:
        with listen(Layers()):
            ours = gpt.generate(prompt, 5, temperature=0)
        assert {"LayerNorm", "Linear"} <= set(seen)  # the profiler sees the layer calls
    else:
        assert not fits(gpt)
        ours = gpt.generate(prompt, 5, temperature=0)
    np.testing.assert_array_equal(ours, expected)


def test_use_cache_false_recomputes_and_plain_removes_the_path(monkeypatch):
    gpt = accelerate(sharp_gpt(seed=6), workers=1)
    prompt = np.array([[2, 7]])
    expected = gpt.generate(prompt, 6, temperature=0)
    monkeypatch.setattr(decode, "_Generation", must_not_run)
    np.testing.assert_array_equal(gpt.generate(prompt, 6, temperature=0, use_cache=False),
                                  expected)  # fmt: skip
    plain(gpt)
    assert "fast_generation" not in vars(gpt) and not fits(gpt)
    np.testing.assert_array_equal(gpt.generate(prompt, 6, temperature=0), expected)


@pytest.mark.parametrize("copy_of", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))],
                         ids=["deepcopy", "pickle"])  # fmt: skip
def test_a_copied_model_keeps_the_whole_token_path(copy_of, monkeypatch):
    gpt = accelerate(sharp_gpt(seed=7), workers=1)
    expected = gpt.generate(np.array([[3, 3, 1]]), 7, temperature=0)
    twin = copy_of(gpt)
    assert fits(twin)
    monkeypatch.setattr(generation, "cached_forward", must_not_run)
    np.testing.assert_array_equal(twin.generate(np.array([[3, 3, 1]]), 7, temperature=0),
                                  expected)  # fmt: skip
