"""generate(): shapes, sampling per row, greedy, top-k, seeds, cropping, the KV cache."""

import numpy as np
import oracle
import pytest

from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformer import GPT
from tinytorch.models.weights import load_torch_state_dict


def small_gpt(seed=0, **overrides):
    np.random.seed(seed)
    config = dict(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    gpt = GPT(**{**config, **overrides})
    for p in gpt.parameters():  # sharper than the N(0, 0.02) init, so logits differ by token
        p.data *= 20 if p.ndim == 2 else 1
    return gpt


def test_shapes_and_the_prompt_is_kept():
    gpt = small_gpt()
    prompt = Tensor(np.array([[1, 2, 3], [4, 5, 6]]))
    out = gpt.generate(prompt, max_new_tokens=4, temperature=0.8, seed=0)
    assert out.shape == (2, 7) and out.dtype == np.int64
    np.testing.assert_array_equal(out[:, :3], prompt.data)
    assert ((out >= 0) & (out < 17)).all()
    assert gpt.generate(prompt, max_new_tokens=0).shape == (2, 3)


def test_every_row_is_sampled_from_its_own_distribution():
    gpt = small_gpt()
    prompt = np.array([[1, 2], [3, 4]])
    rows = np.repeat(prompt, 200, axis=0)  # 200 copies of each prompt in one batch
    first = gpt.generate(rows, max_new_tokens=1, temperature=1.0, seed=1)[:, -1]
    with no_grad():
        last = gpt(prompt).data[:, -1].astype(np.float64)
    probs = np.exp(last - last.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    for i in range(2):
        drawn = first[i * 200 : (i + 1) * 200]
        assert len(np.unique(drawn)) > 1  # rows of the same prompt differ
        counts = np.bincount(drawn, minlength=17) / 200
        assert np.abs(counts - probs[i]).max() < 0.12  # each follows its own softmax


def test_greedy_is_deterministic_and_is_the_argmax():
    gpt = small_gpt()
    prompt = np.array([[3, 1, 4], [1, 5, 9]])
    a = gpt.generate(prompt, max_new_tokens=5, temperature=0, seed=1)
    b = gpt.generate(prompt, max_new_tokens=5, temperature=0, seed=2)
    np.testing.assert_array_equal(a, b)
    for t in range(3, 8):
        np.testing.assert_array_equal(a[:, t], gpt(a[:, :t]).data[:, -1].argmax(-1))


def test_greedy_matches_the_torch_reference_with_and_without_cache():
    # TorchGPT.generate of tests/torch_reference.py, float64, on sharp weights from a seed
    case = oracle.load(__file__).case("greedy")
    gpt = small_gpt(seed=4)
    load_torch_state_dict(gpt, oracle.torch_state(case))
    prompt = case["prompt"]
    ours = gpt.generate(prompt, max_new_tokens=12, temperature=0)  # slides past max_seq_len
    for use_cache in (True, False):
        np.testing.assert_array_equal(ours, case[f"cache_{use_cache}"])


def test_top_k_never_leaves_the_top_k():
    gpt = small_gpt()
    prompt = np.array([[2, 7, 1]] * 300)
    with no_grad():
        logits = gpt(prompt[:1]).data[0, -1]
    top3 = set(np.argsort(logits)[-3:])
    drawn = gpt.generate(prompt, max_new_tokens=1, temperature=2.0, top_k=3, seed=0)[:, -1]
    assert set(drawn) <= top3 and len(set(drawn)) == 3
    top1 = gpt.generate(prompt[:5], max_new_tokens=1, temperature=5.0, top_k=1, seed=0)[:, -1]
    assert set(top1) == {int(np.argmax(logits))}


def test_same_seed_same_tokens_other_seed_other_tokens():
    gpt = small_gpt()
    prompt = np.array([[1, 2], [2, 1], [3, 3]])
    a = gpt.generate(prompt, max_new_tokens=6, seed=7)
    np.testing.assert_array_equal(a, gpt.generate(prompt, max_new_tokens=6, seed=7))
    assert not np.array_equal(a, gpt.generate(prompt, max_new_tokens=6, seed=8))


def test_prompt_longer_than_context_is_cropped():
    gpt = small_gpt()
    prompt = np.arange(25).reshape(1, 25) % 17
    out = gpt.generate(prompt, max_new_tokens=3, temperature=0)
    assert out.shape == (1, 28)
    np.testing.assert_array_equal(out[:, 25], gpt(prompt[:, -10:]).data[:, -1].argmax(-1))


def test_stop_token_ends_rows_and_generation():
    gpt = small_gpt()
    prompt = np.array([[1, 2], [3, 4]])
    free = gpt.generate(prompt, max_new_tokens=8, temperature=0)
    stop = int(free[0, 2])  # the first token row 0 will produce
    out = gpt.generate(prompt, max_new_tokens=8, temperature=0, stop_token=stop)
    assert out[0, 2] == stop and (out[0, 2:] == stop).all()
    row1 = free[1, 2:]
    if stop in row1:  # row 1 ends at its own first stop token, then pads
        end = int(np.argmax(row1 == stop))
        assert out.shape[1] == 2 + end + 1
    else:
        np.testing.assert_array_equal(out[1], free[1])


def test_generation_records_no_graph():
    gpt = small_gpt()
    gpt.generate(np.array([[1, 2]]), max_new_tokens=2)
    assert all(p.grad is None for p in gpt.parameters())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_new_tokens": -1}, r"max_new_tokens must be an integer >= 0, got -1"),
        ({"temperature": -0.5}, r"temperature must be >= 0.*got -0.5"),
        ({"temperature": None}, r"temperature must be >= 0.*got None"),
        ({"top_k": 0}, r"top_k must be a positive integer"),
        ({"stop_token": 17}, r"stop_token must be a token id in \[0, 16\]"),
    ],
)
def test_bad_generation_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        small_gpt().generate(np.array([[1, 2]]), **kwargs)


def test_bad_prompts():
    gpt = small_gpt()
    with pytest.raises(ValueError, match=r"shape \(batch, seq_len\)"):
        gpt.generate(np.array([1, 2, 3]), max_new_tokens=1)
    with pytest.raises(ValueError, match=r"token id 17 is out of range"):
        gpt.generate(np.array([[1, 17]]), max_new_tokens=1)
