"""Module 14: the matrix-multiply FLOPs torch.utils.flop_counter counts for a GPT step, and the
parameter counts of the torch.nn GPT, by PyTorch."""

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode
from torch_reference import TorchGPT

# tests/14_profiling/test_profiling_flops.py's CONFIGS, same order and ids
CONFIGS = {
    "untied": dict(vocab_size=23, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=12),
    "tied": dict(
        vocab_size=31, embed_dim=24, num_layers=1, num_heads=3, max_seq_len=9, tie_weights=True
    ),
    "post-norm": dict(
        vocab_size=19,
        embed_dim=16,
        num_layers=2,
        num_heads=4,
        max_seq_len=8,
        norm_first=False,
        mlp_ratio=2,
    ),  # fmt: skip
}


def build(cases):
    for name, config in CONFIGS.items():
        ref = TorchGPT(**config)
        tokens = np.random.default_rng(1).integers(
            0, config["vocab_size"], size=(3, config["max_seq_len"])
        )
        idx = torch.as_tensor(tokens)
        with FlopCounterMode(display=False) as forward:
            ref(idx)
        with FlopCounterMode(display=False) as step:
            logits = ref(idx)
            torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx.flatten()).backward()
        flops = {"forward": forward.get_total_flops(), "total": step.get_total_flops()}
        cases.put(f"flops/{name}", seed=1, tokens=tokens, **flops)

    ref = TorchGPT(**CONFIGS["tied"])
    cases.put(
        "parameters/tied",
        block0=sum(p.numel() for p in ref.blocks[0].parameters()),
        ln_f=sum(p.numel() for p in ref.ln_f.parameters()),
        total=sum(p.numel() for p in ref.parameters()),
    )
