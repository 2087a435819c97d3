"""Checks that join course modules whose closures hold not each other, so no module's tests can
hold them (a module's tests reach only its closure, tests/tito/test_catalog.py): module 15's
quantized GPT generating through module 17's cache, and module 20's held-out bits per character
of module 13's GPT."""

import math
from pathlib import Path

import numpy as np
import oracle
import pytest

from tinytorch.compress.quantization import quantize_model
from tinytorch.core.transformer import GPT
from tinytorch.models.weights import load_torch_state_dict
from tinytorch.olympics.rules import heldout_bits_per_char

# module 20's PyTorch sums, beside its tests (tests/torch_oracle/m20_capstone.py writes them)
CAPSTONE = oracle.load(Path(__file__).parents[1] / "20_capstone" / "test_capstone_rules.py")


def test_a_quantized_gpt_writes_the_same_tokens_with_the_cache(rng):
    np.random.seed(4)
    gpt = GPT(vocab_size=24, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=16)
    for p in gpt.parameters():  # sharper than the N(0, 0.02) init, so logits differ by token
        p.data *= 20 if p.ndim == 2 else 1
    q = quantize_model(gpt, bits=8)
    prompt = rng.integers(0, 24, size=(2, 3))
    plain = q.generate(prompt, 20, temperature=0, use_cache=False)
    np.testing.assert_array_equal(q.generate(prompt, 20, temperature=0, use_cache=True), plain)


def test_bits_per_char_of_a_real_gpt_matches_its_own_loss():
    # the torch.nn GPT (tests/torch_reference.py) with the same weights: its summed nats
    case = CAPSTONE.case("gpt")
    model = GPT(vocab_size=11, embed_dim=16, num_layers=1, num_heads=2, max_seq_len=8)
    load_torch_state_dict(model, oracle.torch_state(case))
    ids = case["ids"]
    bits = heldout_bits_per_char(model, ids, chars=32, window=8)
    assert bits == pytest.approx(case["nats"].item() / math.log(2) / 32, rel=1e-6)
