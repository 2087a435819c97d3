"""steer_logits and generate(top_p=, repetition_penalty=): the nucleus, the penalty, seeds."""

import numpy as np
import oracle
import pytest

from tinytorch.core.autograd import no_grad
from tinytorch.core.transformer import GPT
from tinytorch.models.decoding import steer_logits


def small_gpt(seed=0):
    np.random.seed(seed)
    gpt = GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    for p in gpt.parameters():  # sharper than the N(0, 0.02) init, so logits differ by token
        p.data *= 20 if p.ndim == 2 else 1
    return gpt


def nucleus(probs: np.ndarray, p: float) -> set[int]:
    """The smallest set of likeliest tokens whose probabilities sum to at least p (one row)."""
    kept, total = set(), 0.0
    for token in sorted(range(len(probs)), key=lambda i: -probs[i]):
        kept.add(token)
        total += probs[token]
        if total >= p:
            return kept
    return kept


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_top_p_keeps_the_smallest_set_holding_p():
    logits = np.log(np.array([[0.5, 0.25, 0.15, 0.1], [0.1, 0.15, 0.25, 0.5]]))
    out = steer_logits(logits, np.zeros((2, 1), dtype=np.int64), 1.0, top_p=0.7)
    assert [set(np.flatnonzero(np.isfinite(row))) for row in out] == [{0, 1}, {2, 3}]
    np.testing.assert_array_equal(out[np.isfinite(out)], logits[np.isfinite(out)])


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("top_p", [0.3, 0.8, 0.95])
def test_top_p_matches_the_definition_at_each_temperature(rng, temperature, top_p):
    logits = rng.normal(0, 2, size=(6, 40))
    out = steer_logits(logits, np.zeros((6, 1), dtype=np.int64), temperature, top_p=top_p)
    for row, steered in zip(logits, out):
        assert set(np.flatnonzero(np.isfinite(steered))) == nucleus(
            softmax(row / temperature), top_p
        )


def test_a_hotter_temperature_widens_the_nucleus(rng):
    logits = rng.normal(0, 2, size=(1, 50))
    context = np.zeros((1, 1), dtype=np.int64)
    sizes = [np.isfinite(steer_logits(logits, context, t, top_p=0.9)).sum() for t in (0.5, 1, 2)]
    assert sizes[0] < sizes[1] < sizes[2]


def test_top_p_off_and_greedy_change_nothing(rng):
    logits = rng.normal(size=(3, 9))
    context = np.zeros((3, 1), dtype=np.int64)
    for kwargs in (dict(top_p=None), dict(top_p=1.0)):
        np.testing.assert_array_equal(steer_logits(logits, context, 0.8, **kwargs), logits)
    np.testing.assert_array_equal(steer_logits(logits, context, 0.0, top_p=0.1), logits)


def test_repetition_penalty_matches_a_torch_oracle():
    # torch.gather, torch.where(score < 0, score * 1.3, score / 1.3), scatter_: committed
    case = oracle.load(__file__).case("repetition_penalty")
    context = case["context"]  # repeats within a row count once
    ours = steer_logits(case["logits"], context, 1.0, repetition_penalty=1.3)
    np.testing.assert_allclose(ours, case["penalized"], rtol=1e-12, atol=0)


def test_repetition_penalty_lowers_a_repeated_tokens_probability():
    logits = np.array([[2.0, 1.0, -0.5, 0.3], [-1.0, -2.0, -0.2, -3.0]])
    before = softmax(logits)
    for token in range(4):  # positive and negative logits alike
        context = np.full((2, 3), token)  # a token seen three times is penalised once
        after = softmax(steer_logits(logits, context, 1.0, repetition_penalty=1.5))
        assert (after[:, token] < before[:, token]).all()
        others = [i for i in range(4) if i != token]
        assert (after[:, others] > before[:, others]).all()  # the rest take up the mass
    np.testing.assert_array_equal(steer_logits(logits, np.array([[0], [0]]), 1.0), logits)


def test_greedy_generation_penalises_the_tokens_of_its_window():
    gpt = small_gpt()
    prompt = np.arange(14).reshape(1, 14) % 17  # longer than max_seq_len=10
    out = gpt.generate(prompt, 6, temperature=0, repetition_penalty=1.8, use_cache=False)
    tokens = prompt
    for _ in range(6):  # the plainest reference: full forward, penalise by hand, argmax
        window = tokens[:, -10:]
        with no_grad():
            logits = gpt(window).data[0, -1].astype(np.float64)
        for token in set(window[0].tolist()):  # only what the model sees, each token once
            logits[token] = logits[token] / 1.8 if logits[token] > 0 else logits[token] * 1.8
        tokens = np.concatenate([tokens, [[int(np.argmax(logits))]]], axis=1)
    np.testing.assert_array_equal(out, tokens)
    assert not np.array_equal(out, gpt.generate(prompt, 6, temperature=0, use_cache=False))


def test_generate_never_draws_outside_the_nucleus():
    gpt = small_gpt()
    prompt = np.array([[2, 7, 1]] * 300)
    with no_grad():
        probs = softmax(gpt(prompt[:1]).data[0, -1].astype(np.float64) / 1.5)
    allowed = nucleus(probs, 0.6)
    drawn = gpt.generate(prompt, max_new_tokens=1, temperature=1.5, top_p=0.6, seed=0)[:, -1]
    assert set(drawn.tolist()) == allowed  # 300 draws reach every member and nothing else
    both = gpt.generate(prompt, 1, temperature=1.5, top_p=0.6, top_k=1, seed=0)[:, -1]
    assert set(both.tolist()) == {int(np.argmax(probs))}  # with top-k a token must pass both


def test_same_seed_same_tokens_with_top_p_and_penalty():
    gpt = small_gpt(seed=3)
    prompt = np.array([[1, 2], [2, 1], [3, 3]])
    kwargs = dict(max_new_tokens=12, temperature=0.9, top_p=0.9, repetition_penalty=1.3)
    a = gpt.generate(prompt, seed=7, **kwargs)
    np.testing.assert_array_equal(a, gpt.generate(prompt, seed=7, **kwargs))
    assert not np.array_equal(a, gpt.generate(prompt, seed=8, **kwargs))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\] \(1 = off\), got 0.0"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"top_p": float("nan")}, r"top_p must be in \(0, 1\]"),
        ({"repetition_penalty": 0.0}, r"repetition_penalty must be > 0 \(1 = off"),
        ({"repetition_penalty": float("inf")}, r"repetition_penalty must be > 0"),
    ],
)
def test_bad_steering_arguments(kwargs, message):
    # with module 17's cache: tests/17_memoization (this module's checks ask nothing of it)
    with pytest.raises(ValueError, match=message):
        small_gpt().generate(np.array([[1, 2]]), max_new_tokens=2, use_cache=False, **kwargs)
