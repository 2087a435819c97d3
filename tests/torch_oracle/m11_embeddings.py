"""Module 11: the embedding lookup and its gradient, by PyTorch."""

import numpy as np
import torch


def build(cases):
    rng = np.random.default_rng(2)
    weight = rng.standard_normal((50, 16)).astype(np.float32)
    ids = rng.integers(0, 50, size=(8, 33))
    upstream = rng.standard_normal((8, 33, 16)).astype(np.float32)
    w = torch.tensor(weight, requires_grad=True)
    out = torch.nn.functional.embedding(torch.tensor(ids), w)
    (out * torch.tensor(upstream)).sum().backward()
    cases.put("lookup", seed=2, weight=weight, ids=ids, upstream=upstream, out=out, grad=w.grad)
