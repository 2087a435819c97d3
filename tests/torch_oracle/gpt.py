"""The torch.nn GPT of tests/torch_reference.py with weights drawn from a seed, for the oracles of
modules 13-18: its state dict (torch layout, float32) goes into the committed case as `state.*`
fields, which `tinytorch.models.weights.load_torch_state_dict` loads into a tinytorch GPT."""

import numpy as np
import torch
from torch_reference import TorchGPT


def seeded(config: dict, seed: int, scale: float = 0.05, sharpen: float = 1.0):
    """(TorchGPT in float64, its float32 state) with every weight drawn from `seed`.

    Weights are N(0, scale) (matrices times `sharpen`), LayerNorm gains 1 + N(0, scale): off
    any special point, so biases and norms matter."""
    ref = TorchGPT(**config)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in ref.named_parameters():  # a tied weight appears once
            value = rng.normal(0, scale, tuple(p.shape))
            if p.ndim == 2:
                value *= sharpen
            if ".ln" in f".{name}" and name.endswith("weight"):
                value += 1.0
            p.copy_(torch.from_numpy(value.astype(np.float32)))
    state = {f"state.{k}": v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    return ref.double(), state


def forward_and_grads(ref, tokens, weight) -> dict:
    """Logits, and every parameter's gradient (torch layout) of sum(logits * weight), computed
    in float64 and stored in float32 (the tests' tolerances are 1e-4; the files stay small)."""
    weight = np.asarray(weight, dtype=np.float32)
    ref.zero_grad()
    logits = ref(torch.as_tensor(tokens))
    (logits * torch.as_tensor(weight, dtype=logits.dtype)).sum().backward()
    grads = {f"grad.{k}": p.grad.float() for k, p in ref.named_parameters()}
    return {"tokens": tokens, "weight": weight, "logits": logits.float()} | grads
