"""`accelerate`: a model keeps its class, parameters and state_dict, and computes what the
lesson code computes (logits, every gradient, generated tokens), PyTorch included."""

import numpy as np
import oracle
import pytest

from tinytorch.accel.accelerate import PARTS, accelerate, accelerated, plain
from tinytorch.accel.parallel import DataParallel
from tinytorch.core.attention import MultiHeadAttention, causal_mask
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam, AdamW
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.models.seq2seq import Seq2SeqTransformer
from tinytorch.models.transformer import GPT
from tinytorch.models.weights import load_torch_state_dict

# PyTorch's answers, committed by tests/torch_oracle/m18_acceleration.py
REF = oracle.load(__file__)


def small_gpt(seed=0):
    np.random.seed(seed)
    return GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)


def loss_and_grads(model, tokens) -> dict:
    for p in model.parameters():
        p.grad = None
    logits = model(tokens)
    cross_entropy(logits, tokens).backward()
    return {"logits": logits.data, **{n: p.grad.copy() for n, p in model.named_parameters()}}


@pytest.mark.parametrize("recompute", [False, True])
def test_an_accelerated_gpt_equals_the_lesson_gpt_and_torch(recompute):
    torch_case = REF.case("gpt")  # the torch.nn GPT of tests/torch_reference.py, float64
    model = small_gpt()
    load_torch_state_dict(model, oracle.torch_state(torch_case))
    tokens = torch_case["tokens"]
    lesson = loss_and_grads(model, tokens)
    state = {k: v.copy() for k, v in model.state_dict().items()}
    assert accelerate(model, recompute=recompute) is model
    assert type(model) is GPT and accelerated(model) == set(PARTS) - {"adamw"}
    fast = loss_and_grads(model, tokens)
    for name, value in lesson.items():
        np.testing.assert_allclose(fast[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    assert state.keys() == model.state_dict().keys()
    assert all(np.array_equal(v, model.state_dict()[k]) for k, v in state.items())

    # F.cross_entropy(logits, tokens) in torch: its logits and every gradient
    np.testing.assert_allclose(fast["logits"], torch_case["logits"], rtol=1e-4, atol=1e-5)
    torch_grads = oracle.torch_grads(torch_case)
    for name in dict(model.named_parameters()):
        key = name.replace(".gamma", ".weight").replace(".beta", ".bias")
        want = torch_grads[key]
        linear = name.endswith(".weight") and "embedding" not in name  # ours (in, out)
        got = fast[name].T if linear else fast[name]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-6, err_msg=name)


def test_generation_and_the_kv_cache_are_unchanged(rng):
    model = small_gpt(1)
    prompt = rng.integers(0, 17, (2, 3))
    want = model.generate(prompt, max_new_tokens=12, temperature=0)
    accelerate(model)
    np.testing.assert_array_equal(model.generate(prompt, max_new_tokens=12, temperature=0), want)
    again = model.generate(prompt, max_new_tokens=12, temperature=0, use_cache=False)
    np.testing.assert_array_equal(again, want)


def test_cross_attention_of_an_encoder_decoder_is_accelerated_too(rng):
    np.random.seed(2)
    model = Seq2SeqTransformer(vocab_size=13, embed_dim=16, num_layers=1, num_heads=2)
    source, target = rng.integers(0, 13, (2, 5)), rng.integers(0, 13, (2, 4))
    lesson = model(source, target)
    lesson.sum().backward()
    lesson_grads = {n: p.grad.copy() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = None
    accelerate(model)
    fast = model(source, target)
    fast.sum().backward()
    np.testing.assert_allclose(fast.data, lesson.data, rtol=1e-4, atol=1e-6)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad, lesson_grads[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_the_fast_path_hands_what_it_does_not_cover_to_the_lesson(rng):
    attn = accelerate(MultiHeadAttention(8, 2))
    lesson = MultiHeadAttention(8, 2)
    x = rng.normal(size=(1, 4, 8)).astype(np.float32)
    for bad in (np.zeros((4, 4), dtype=bool), np.zeros((3, 3))):
        with pytest.raises(Exception) as fast_err:
            attn(Tensor(x), bad)
        with pytest.raises(type(fast_err.value)) as lesson_err:
            lesson(Tensor(x), bad)
        assert str(fast_err.value) == str(lesson_err.value)
    with pytest.raises(ShapeError, match="must have shape"):
        attn(Tensor(x[..., :4]))
    out = attn(Tensor(x), causal_mask(4))
    assert attn.last_attention.shape == (1, 2, 4, 4)
    np.testing.assert_allclose(attn.last_attention.sum(-1), 1, rtol=1e-5)
    attn.keep_attention = False
    attn(Tensor(x))
    assert attn.last_attention is None and out.shape == (1, 4, 8)


def test_data_parallel_over_an_accelerated_model_gives_the_whole_batch_gradient(rng):
    model = small_gpt(3)
    tokens = rng.integers(0, 17, (4, 10))
    want = loss_and_grads(model, tokens)
    accelerate(model)
    for p in model.parameters():
        p.grad = None
    loss = DataParallel(model, 2).backward(cross_entropy, tokens, tokens)
    whole = cross_entropy(Tensor(want["logits"]), tokens).item()
    np.testing.assert_allclose(loss, whole, rtol=1e-5)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad, want[name], rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("cls", [AdamW, Adam])
def test_accelerated_adam_equals_the_lesson_and_torch(cls):
    torch_case = REF.case(f"adam/{cls.__name__}")  # torch.optim's parameter after the steps
    start, grads = torch_case["start"], torch_case["grads"]
    ours = Tensor(start.copy(), requires_grad=True)
    lesson_p = Tensor(start.copy(), requires_grad=True)
    fast = accelerate(cls([ours], lr=0.05, weight_decay=0.1))
    lesson = cls([lesson_p], lr=0.05, weight_decay=0.1)
    assert accelerated(fast) == {"adamw"} and isinstance(fast, cls) and type(lesson) is cls
    for g in grads:
        ours.grad, lesson_p.grad = g.copy(), g.copy()
        fast.step()
        lesson.step()
    np.testing.assert_allclose(ours.data, lesson_p.data, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours.data, torch_case["end"], rtol=1e-5, atol=1e-6)
    # the state keeps the lesson's names: a checkpoint moves between the two
    restored = cls([Tensor(start.copy(), requires_grad=True)], lr=0.05, weight_decay=0.1)
    restored.load_state_dict(fast.state_dict())
    assert restored.state_dict().keys() == fast.state_dict().keys()
    assert accelerated(plain(fast)) == set() and type(fast) is cls


def test_recomputed_attention_keeps_no_weights_after_a_training_forward(rng):
    # neither the graph nor `last_attention` may hold the (B, H, T, T) weights of a layer that
    # recomputes them; under no_grad (plots) `last_attention` is still kept
    import tracemalloc

    from tinytorch.core.autograd import no_grad

    tokens = rng.integers(0, 17, (4, 10))
    held = {}
    for recompute in (False, True):
        model = accelerate(small_gpt(), recompute=recompute)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            loss = cross_entropy(model(tokens), tokens)
            held[recompute] = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        loss.backward()
    weights = 2 * 4 * 4 * 10 * 10 * 4  # layers x (B, H, T, T) float32
    assert held[False] - held[True] >= weights
    assert all(b.attention.last_attention is None for b in model.blocks)
    with no_grad():
        model(tokens)
    assert model.blocks[0].attention.last_attention.shape == (4, 4, 10, 10)
