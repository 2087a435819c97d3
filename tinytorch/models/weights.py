"""A GPT's (or module 21's Llama's) weights on disk, and a GPT's in PyTorch's names and layouts.

`save_model(model, path)` writes a module-07 checkpoint (`save_checkpoint`: one `.npz` archive, no
pickle, written atomically) whose `extra` holds the model's configuration under MODEL_CONFIG (and,
for a Llama, ARCHITECTURE "llama"), and `load_model(path)` rebuilds the GPT or the Llama from it
(`read_checkpoint`): one format for every saved model. `to_torch_state_dict` renames and
transposes the weights for the same model written with `torch.nn` (`nn.Linear` stores
`(out, in)`, ours `(in, out)`; `nn.LayerNorm` says `weight`/`bias` for `gamma`/`beta`),
`load_torch_state_dict` reads one back.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it builds on module 13's GPT and
module 07's checkpoints.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from tinytorch.core.layers import Linear, Module
from tinytorch.core.training import read_checkpoint, save_checkpoint
from tinytorch.models.transformer import GPT

MODEL_CONFIG = "gpt_config"  # the key in a checkpoint's extra that makes it a save_model file
ARCHITECTURE = "architecture"  # beside it: "llama" for module 21's Llama; absent for a GPT


def save_model(model: Module, path) -> None:
    """Write config and weights of a GPT or a Llama to an .npz checkpoint (no pickle)."""
    path = Path(path)
    path = path if path.suffix == ".npz" else path.with_name(path.name + ".npz")  # as np.savez
    extra = {MODEL_CONFIG: asdict(model.config)}
    if type(model.config).__name__ == "LlamaConfig":  # module 21, imported only to load one
        extra[ARCHITECTURE] = "llama"
    save_checkpoint(path, model, extra=extra)


def load_model(path) -> Module:
    """Rebuild the GPT (or module 21's Llama) saved by `save_model`."""
    weights, _, _, extra, _ = read_checkpoint(path)
    if MODEL_CONFIG not in extra:
        raise ValueError(
            f"{path} is a checkpoint without a model configuration; load it into a model you "
            "build with load_checkpoint, or write it with save_model"
        )
    kind = extra.get(ARCHITECTURE, "gpt")
    if kind == "llama":
        from tinytorch.models.llama import Llama

        model = Llama(**extra[MODEL_CONFIG])
    elif kind == "gpt":
        model = GPT(**extra[MODEL_CONFIG])
    else:
        raise ValueError(f"{path} holds a {kind!r} model; load_model builds a GPT or a Llama")
    model.load_state_dict(weights)
    return model


def _linear_weight_ids(model: Module) -> set[int]:
    return {id(m.weight) for m in model.modules() if isinstance(m, Linear)}


def to_torch_state_dict(model: Module) -> dict[str, np.ndarray]:
    """Our weights under PyTorch's names and layouts (load with torch.from_numpy)."""
    linear, out = _linear_weight_ids(model), {}
    for name, p in model.named_parameters():
        stem, leaf = name.rsplit(".", 1)
        leaf = {"gamma": "weight", "beta": "bias"}.get(leaf, leaf)
        out[f"{stem}.{leaf}"] = np.ascontiguousarray(p.data.T if id(p) in linear else p.data)
    if getattr(model, "lm_head", False) is None:  # tied: PyTorch lists the shared matrix twice
        out["lm_head.weight"] = out["token_embedding.weight"]
    return out


def load_torch_state_dict(model: Module, state: dict) -> None:
    """Load a PyTorch-layout state dict (arrays, or tensors via .numpy()) into `model`."""
    linear, ours = _linear_weight_ids(model), {}
    for name, p in model.named_parameters():
        stem, leaf = name.rsplit(".", 1)
        key = f"{stem}.{ {'gamma': 'weight', 'beta': 'bias'}.get(leaf, leaf) }"
        if key not in state:
            raise KeyError(f"PyTorch state dict has no '{key}' (needed for '{name}')")
        value = np.asarray(state[key])
        ours[name] = value.T if id(p) in linear else value
    model.load_state_dict(ours)


__all__ = [
    "MODEL_CONFIG",
    "ARCHITECTURE",
    "save_model",
    "load_model",
    "to_torch_state_dict",
    "load_torch_state_dict",
]
