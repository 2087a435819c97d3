"""Module 17: cached greedy generation of the torch.nn GPT (tests/torch_reference.py)."""

import numpy as np
import torch

from torch_oracle import gpt


def build(cases):
    config = dict(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    ref, state = gpt.seeded(config, seed=4, scale=0.02, sharpen=20)  # logits differ by token
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    tokens = ref.generate(torch.as_tensor(prompt), 12, temperature=0, use_cache=True)  # slides
    cases.put("greedy", seed=4, prompt=prompt, **state, tokens=tokens)
