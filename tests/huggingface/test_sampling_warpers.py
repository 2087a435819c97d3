"""generate's top-k and top-p against transformers' own warpers, applied in its order."""

import numpy as np
import pytest
import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from tinytorch.models.decoding import steer_logits
from tinytorch.models.transformer import sample_next


@pytest.mark.parametrize("temperature", [0.6, 1.0, 1.5])
@pytest.mark.parametrize("top_k,top_p", [(2, 0.5), (4, 0.7), (10, 0.9), (25, 0.4), (50, 0.95)])
def test_the_tokens_left_to_draw_are_hugging_faces(temperature, top_k, top_p):
    logits = np.random.default_rng(top_k).normal(0, 2, size=(5, 50))  # no ties
    scores = torch.tensor(logits)
    for warper in (TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k),
                   TopPLogitsWarper(top_p)):  # fmt: skip
        scores = warper(None, scores)
    steered = steer_logits(logits, np.zeros((5, 1), np.int64), temperature, top_p, top_k=top_k)
    np.testing.assert_array_equal(np.isfinite(steered), torch.isfinite(scores).numpy())
    for seed in range(50):  # and sample_next's own top-k keeps every one of them
        row = sample_next(steered, temperature, top_k, np.random.default_rng(seed))
        assert torch.isfinite(scores[np.arange(5), torch.tensor(row)]).all()


def test_top_k_keeps_as_many_tokens_as_torch_topk_returns():
    logits = np.array([[1.0, 3.0, 3.0, 3.0, 0.0, 3.0]])  # a four-way tie at the top
    for k in (1, 2, 3, 5):
        values = torch.topk(torch.tensor(logits), k).values.numpy()
        draws = [int(sample_next(logits, 1.0, k, np.random.default_rng(s))[0]) for s in range(300)]
        assert sorted(logits[0, sorted(set(draws))]) == sorted(values[0])
