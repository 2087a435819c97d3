"""Module 20: held-out cross-entropy (summed nats) by torch.nn.functional.cross_entropy."""

import numpy as np
import torch

from torch_oracle import gpt


def build(cases):
    for window in (1, 3, 7):
        rng = np.random.default_rng(window)
        table = rng.normal(0, 4, size=(9, 9))  # a bigram model: logits = table[token]
        ids = rng.integers(0, 9, size=50)
        count = (len(ids) - 1) // window  # non-overlapping windows
        inputs = torch.tensor(ids[: count * window]).reshape(count, window)
        targets = torch.tensor(ids[1 : count * window + 1]).reshape(count, window)
        logits = torch.tensor(table)[inputs]
        nats = torch.nn.functional.cross_entropy(
            logits.reshape(-1, 9), targets.reshape(-1), reduction="sum"
        )
        cases.put(f"table/{window}", seed=window, table=table, ids=ids, nats=nats)

    config = dict(vocab_size=11, embed_dim=16, num_layers=1, num_heads=2, max_seq_len=8)
    ref, state = gpt.seeded(config, seed=0, scale=0.1)
    ids = np.random.default_rng(1).integers(0, 11, size=33)
    with torch.no_grad():
        logits = ref.float()(torch.as_tensor(ids[:32].reshape(4, 8))).double()
    nats = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 11), torch.tensor(ids[1:33]), reduction="sum"
    )
    cases.put("gpt", seed=0, ids=ids, nats=nats, **state)
