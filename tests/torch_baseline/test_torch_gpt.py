"""The benchmark's PyTorch baseline does the same math as tinytorch's GPT (a fair race)."""

import numpy as np
import torch

from benchmarks.torch_gpt import TorchGPT
from tinytorch.core.autograd import no_grad
from tinytorch.models.transformer import GPT, GPTConfig


def _pair(tie_weights: bool):
    np.random.seed(0)
    ours = GPT.from_config(
        GPTConfig(
            vocab_size=23,
            embed_dim=32,
            num_layers=2,
            num_heads=4,
            max_seq_len=24,
            tie_weights=tie_weights,
        )
    )
    return ours, TorchGPT.from_tinytorch(ours)


def test_same_logits_with_fused_qkv_and_sdpa():
    for tie in (False, True):
        ours, ref = _pair(tie)
        x = np.random.default_rng(1).integers(0, 23, size=(2, 11))
        with no_grad():
            expected = ours(x).data
        with torch.no_grad():
            got = ref(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_preallocated_cache_generates_tinytorch_greedy_tokens_even_when_the_window_slides():
    ours, ref = _pair(False)
    prompt = np.random.default_rng(2).integers(0, 23, size=(1, 5))
    expected = ours.generate(prompt, 30, temperature=0)  # 35 > max_seq_len 24: slides
    got = ref.generate(torch.from_numpy(prompt), 30).numpy()
    np.testing.assert_array_equal(got, expected)
