"""Top-k keeps exactly k tokens (ties to the lowest ids), and with top-p it goes first: the
nucleus is taken from the k survivors' renormalised probabilities, Hugging Face's order."""

import numpy as np
import pytest

from tinytorch.core.transformer import GPT
from tinytorch.models.decoding import steer_logits
from tinytorch.models.transformer import sample_next


def hf_top_k_then_top_p(logits: np.ndarray, top_k: int, top_p: float) -> set[int]:
    """Hugging Face's TopKLogitsWarper then TopPLogitsWarper on one row, in numpy.

    Top-k: every token below the k-th largest score goes to -inf (the row has no ties here).
    Top-p: sort the survivors' softmax ascending, drop those whose cumulative sum is <= 1 - p,
    always keeping the likeliest.
    """
    kth = np.sort(logits)[-top_k]
    scores = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    ascending = np.argsort(probs)
    removed = np.cumsum(probs[ascending]) <= 1 - top_p
    removed[-1] = False
    return set(range(len(logits))) - set(ascending[removed].tolist())


def kept(logits: np.ndarray, temperature: float, top_k, top_p) -> list[set[int]]:
    """The ids a seeded draw can reach: steer_logits, then sample_next's own top-k."""
    steered = steer_logits(logits, np.zeros((len(logits), 1), np.int64), temperature, top_p,
                           top_k=top_k)  # fmt: skip
    reachable = []
    for row in steered:
        draws = {int(sample_next(row[None], temperature, top_k, np.random.default_rng(s))[0])
                 for s in range(400)}  # fmt: skip
        assert draws <= set(np.flatnonzero(np.isfinite(row)).tolist())
        reachable.append(set(np.flatnonzero(np.isfinite(row)).tolist()))
    return reachable


def test_top_k_one_with_a_three_way_tie_always_draws_the_lowest_id():
    logits = np.array([[0.5, 2.0, -1.0, 2.0, 2.0, 0.0]])
    draws = {int(sample_next(logits, 1.0, 1, np.random.default_rng(s))[0]) for s in range(200)}
    assert draws == {1}


@pytest.mark.parametrize("top_k", [1, 2, 3, 4])
def test_top_k_keeps_exactly_k_tokens_whatever_the_ties(top_k):
    # the k-th value 1.0 is shared by ids 2, 4 and 6; 3.0 at id 5 is above it
    logits = np.array([[0.0, 1.0, 1.0, -2.0, 1.0, 3.0, 1.0]])
    draws = {int(sample_next(logits, 2.0, top_k, np.random.default_rng(s))[0]) for s in range(600)}
    assert draws == set([5, 1, 2, 4][:top_k])  # the largest, then the tied ids lowest first


def test_top_p_after_top_k_keeps_one_of_two_equal_tokens():
    # probabilities [.3, .3, .2, .2]: top_k=2 leaves [.5, .5]; top_p=0.5 is reached by the first
    logits = np.log(np.array([[0.3, 0.3, 0.2, 0.2]]))
    assert kept(logits, 1.0, 2, 0.5) == [{0}]
    assert kept(logits, 1.0, None, 0.5) == [{0, 1}]  # top-p alone on the full distribution


@pytest.mark.parametrize("temperature", [0.7, 1.0, 1.6])
@pytest.mark.parametrize("top_k,top_p", [(3, 0.5), (5, 0.8), (8, 0.95), (12, 0.3), (40, 0.9)])
def test_top_k_then_top_p_matches_hugging_faces_rule(temperature, top_k, top_p):
    logits = np.random.default_rng(top_k).normal(0, 2, size=(4, 40))
    ours = kept(logits, temperature, top_k, top_p)
    assert ours == [hf_top_k_then_top_p(row / temperature, top_k, top_p) for row in logits]


def test_generate_with_both_filters_draws_only_from_the_top_k_nucleus():
    np.random.seed(0)
    gpt = GPT(vocab_size=17, embed_dim=16, num_layers=1, num_heads=2, max_seq_len=8)
    for p in gpt.parameters():
        p.data *= 20 if p.ndim == 2 else 1
    prompt = np.array([[3, 1, 4]])
    logits = gpt(prompt).data[:, -1].astype(np.float64)
    allowed = hf_top_k_then_top_p(logits[0], 4, 0.6)
    firsts = {int(gpt.generate(prompt, 1, top_k=4, top_p=0.6, seed=s, use_cache=False)[0, -1])
              for s in range(60)}  # fmt: skip
    assert firsts <= allowed and len(allowed) < 4
