"""`accelerate` on module 21's Llama (the given tinytorch/accel/llama.py): the accelerated model
computes the plain model's logits, gradients and tokens, keeps its class and parameters, splits
its batch over threads, and `plain` undoes it all. Each fast Function's backward is checked by
finite differences in test_accelerate_llama_kernels.py."""

import sys
import types

import numpy as np
import pytest

from tinytorch.accel.accelerate import PARTS, accelerate, accelerated, plain
from tinytorch.accel.llama import FAST
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.models.llama import GroupedQueryAttention, Llama
from tinytorch.models.transformer import GPT
from tinytorch.nn.llama import RMSNorm, RotaryEmbedding, SwiGLU

LLAMA_PARTS = {"rmsnorm", "rotary", "swiglu", "gqa"}
SHAPES = {
    "grouped": dict(num_heads=4, num_kv_heads=2),
    "multi-query": dict(num_heads=4, num_kv_heads=1),
    "multi-head, tied": dict(num_heads=4, num_kv_heads=4, tie_weights=True),
}


def small_llama(seed=0, **changes):
    np.random.seed(seed)
    sizes = dict(vocab_size=29, embed_dim=32, num_layers=2, num_heads=4, num_kv_heads=2,
                 max_seq_len=16, multiple_of=16)  # fmt: skip
    return Llama(**{**sizes, **changes})


TOKENS = np.random.default_rng(3).integers(0, 29, size=(3, 12))


def step(model, tokens=TOKENS):
    """Logits and the loss's gradient of every parameter, by name."""
    for p in model.parameters():
        p.grad = None
    logits = model(Tensor(tokens))
    cross_entropy(logits, tokens).backward()
    return logits.data, {name: p.grad for name, p in model.named_parameters()}


def assert_same_step(fast, slow):
    (fast_logits, fast_grads), (logits, grads) = step(fast), step(slow)
    np.testing.assert_allclose(fast_logits, logits, rtol=1e-4, atol=1e-5)
    assert fast_grads.keys() == grads.keys()
    for name, g in grads.items():
        assert fast_grads[name] is not None, name
        scale = np.abs(g).max()
        np.testing.assert_allclose(fast_grads[name], g, rtol=1e-4, atol=1e-5 * scale, err_msg=name)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_the_accelerated_llama_computes_the_plain_logits_and_every_gradient(shape):
    fast = accelerate(small_llama(**shape), workers=1)
    assert accelerated(fast) == LLAMA_PARTS | {"embedding"}
    assert_same_step(fast, small_llama(**shape))


@pytest.mark.parametrize("recompute", [True, False])
def test_recomputed_attention_weights_give_the_same_gradients(recompute):
    fast = accelerate(small_llama(), workers=1, recompute=recompute)
    attention = fast.blocks[0].attention
    assert attention.recompute is recompute
    assert_same_step(fast, small_llama())


def test_the_batch_split_over_threads_gives_the_whole_batchs_gradients():
    fast = accelerate(small_llama(), workers=2)
    assert vars(fast)["split_workers"] == 2  # the split is this object's attribute
    assert_same_step(fast, small_llama())
    plain(fast)
    assert "forward" not in vars(fast) and "split_workers" not in vars(fast)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("use_cache", [True, False])
def test_generation_writes_the_plain_models_tokens(workers, use_cache):
    fast, slow = accelerate(small_llama(), workers=workers), small_llama()
    prompt = TOKENS[:2, :5]
    for kwargs in (dict(temperature=0), dict(temperature=0.8, top_k=5, seed=7)):
        # 20 new tokens after 5: the 16-position window slides and the caches restart
        want = slow.generate(prompt, 20, use_cache=use_cache, **kwargs)
        got = fast.generate(prompt, 20, use_cache=use_cache, **kwargs)
        np.testing.assert_array_equal(got, want)


def test_cached_positions_continue_with_the_plain_models_logits():
    fast, slow = accelerate(small_llama(), workers=1), small_llama()
    caches_fast, caches_slow = fast.new_caches(), slow.new_caches()
    for chunk in (TOKENS[:, :5], TOKENS[:, 5:6], TOKENS[:, 6:10]):  # start 0, 5, 6
        got = fast(chunk, caches_fast).data
        np.testing.assert_allclose(got, slow(chunk, caches_slow).data, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(caches_fast[1].k, caches_slow[1].k, rtol=1e-5, atol=1e-6)
    assert caches_fast[0].k.shape == (3, 2, 10, 8)  # the kv heads only


def test_the_model_keeps_its_class_parameters_and_state_and_plain_undoes_it():
    model, reference = small_llama(), small_llama()
    params = model.parameters()
    accelerate(model)
    block = model.blocks[0]
    assert type(model) is Llama and model.parameters() == params
    assert isinstance(block.attention, GroupedQueryAttention) and isinstance(
        block.ffn_norm, RMSNorm
    )
    assert isinstance(block.feed_forward, SwiGLU)
    assert isinstance(block.attention.rotary, RotaryEmbedding)
    assert type(block.attention).__name__ == "GroupedQueryAttention"
    state = model.state_dict()
    assert state.keys() == reference.state_dict().keys()
    for name, value in reference.state_dict().items():
        np.testing.assert_array_equal(state[name], value)
    assert accelerate(model) is model  # twice: still one subclass deep
    assert type(block.attention).lesson_class is GroupedQueryAttention
    plain(model)
    assert accelerated(model) == set()
    assert type(block.attention) is GroupedQueryAttention and type(block.ffn_norm) is RMSNorm
    assert type(block.feed_forward) is SwiGLU and type(block.attention.rotary) is RotaryEmbedding
    assert "recompute" not in vars(block.attention)


def test_parts_choose_the_llama_layers_and_the_gpt_parts_stay_as_they_were():
    model = accelerate(small_llama(), parts=("rmsnorm", "swiglu"), workers=1)
    assert accelerated(model) == {"rmsnorm", "swiglu"}
    assert type(model.blocks[0].attention) is GroupedQueryAttention
    assert set(FAST) == LLAMA_PARTS and not LLAMA_PARTS & set(PARTS)
    with pytest.raises(ValueError, match="unknown part.*'rmsnorm', 'rotary', 'swiglu', 'gqa'"):
        accelerate(model, parts=("rms",))


def test_what_the_fast_paths_do_not_cover_gets_the_lessons_messages():
    model = accelerate(small_llama(), workers=1)
    block = model.blocks[0]
    with pytest.raises(ShapeError, match=r"RMSNorm\(32\) got input of shape \(2, 5\)"):
        block.attention_norm(np.ones((2, 5), dtype=np.float32))
    with pytest.raises(ShapeError, match="GroupedQueryAttention: x must have shape"):
        block.attention(np.ones((2, 5), dtype=np.float32))
    with pytest.raises(ShapeError, match="outside the rotary table of max_seq_len=16"):
        block.attention.rotary(np.ones((1, 4, 8), dtype=np.float32), start=14)
    with pytest.raises(ShapeError, match="outside the rotary table"):
        block.attention(np.ones((1, 4, 32), dtype=np.float32), start=14)


def test_the_rotary_layer_alone_turns_rows_as_the_lessons():
    fast_layer = accelerate(small_llama(), workers=1).blocks[0].attention.rotary
    slow_layer = small_llama().blocks[0].attention.rotary
    x = np.random.default_rng(1).normal(size=(2, 3, 5, 8)).astype(np.float32)
    got = fast_layer(Tensor(x, requires_grad=True), start=7)
    want = slow_layer(Tensor(x), start=7)
    np.testing.assert_allclose(got.data, want.data, rtol=1e-5, atol=1e-6)
    assert type(got._ctx).__name__ == "FusedRotary"  # one node, not the lesson's


@pytest.mark.parametrize("missing", ["file", "lesson"])
def test_without_module_21_accelerate_knows_the_gpt_parts_only(monkeypatch, missing):
    """No tinytorch/accel/llama.py (a package staged for module 18), or a module 21 without the
    names it imports: a GPT is accelerated as before."""
    if missing == "file":
        monkeypatch.setitem(sys.modules, "tinytorch.accel.llama", None)  # ModuleNotFoundError
    else:
        monkeypatch.delitem(sys.modules, "tinytorch.accel.llama")
        monkeypatch.setitem(
            sys.modules, "tinytorch.nn.llama", types.ModuleType("tinytorch.nn.llama")
        )
    np.random.seed(0)
    gpt = accelerate(GPT(vocab_size=11, embed_dim=16, num_layers=1, num_heads=2, max_seq_len=8))
    assert accelerated(gpt) == set(PARTS) - {"adamw"}
    with pytest.raises(ValueError, match=r"unknown part\(s\) \['rmsnorm'\]; choose from \['gelu'"):
        accelerate(gpt, parts=("rmsnorm",))


def test_an_attention_layer_called_alone_agrees_for_any_start_and_mask():
    fast = accelerate(small_llama(), workers=1).blocks[1].attention
    slow = small_llama().blocks[1].attention
    x = np.random.default_rng(4).normal(size=(2, 5, 32)).astype(np.float32)
    causal = np.triu(np.full((5, 5), -np.inf, dtype=np.float32), k=1)
    padded = np.zeros((2, 1, 1, 5), dtype=np.float32)  # (B, 1, 1, T): the lesson's path
    padded[1, ..., 3:] = -np.inf
    for mask, start in ((None, 0), (causal, 6), (padded, 2)):
        got, want = fast(Tensor(x), mask, start), slow(Tensor(x), mask, start)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="attention masks are additive floats"):
        fast(Tensor(x), causal > 0)  # the lesson's message for a boolean mask


def test_a_projection_given_a_bias_takes_the_lessons_path():
    fast = accelerate(small_llama(), workers=1).blocks[0].attention
    slow = small_llama().blocks[0].attention
    for layer in (fast, slow):
        layer.k_proj.bias = Tensor(np.linspace(-1, 1, 16), requires_grad=True)
    x = Tensor(np.random.default_rng(5).normal(size=(1, 4, 32)))
    np.testing.assert_allclose(fast(x).data, slow(x).data, rtol=1e-4, atol=1e-5)
