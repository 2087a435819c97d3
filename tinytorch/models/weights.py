"""A GPT's weights on disk and in PyTorch's names and layouts.

`save_model(model, path)` writes the config and weights to one `.npz` archive (no pickle; through
module 07's `write_atomic`, so an interrupted save never leaves half a file) and
`load_model(path)` rebuilds the GPT. `to_torch_state_dict` renames and transposes the weights for
the same model written with `torch.nn` (`nn.Linear` stores `(out, in)`, ours `(in, out)`;
`nn.LayerNorm` says `weight`/`bias` for `gamma`/`beta`), `load_torch_state_dict` reads one back.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it builds on module 13's GPT and
module 07's `write_atomic`.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from tinytorch.core.layers import Linear, Module
from tinytorch.core.training import write_atomic
from tinytorch.models.transformer import GPT


def save_model(model: GPT, path) -> None:
    """Write config and weights to an .npz file (no pickle)."""
    path = Path(path)
    path = path if path.suffix == ".npz" else path.with_name(path.name + ".npz")  # as np.savez
    config = np.array(json.dumps(asdict(model.config)))
    weights = model.state_dict()
    write_atomic(path, lambda handle: np.savez(handle, __config__=config, **weights))


def load_model(path) -> GPT:
    """Rebuild a GPT saved by `save_model`."""
    with np.load(path, allow_pickle=False) as archive:
        model = GPT(**json.loads(str(archive["__config__"])))
        model.load_state_dict({k: archive[k] for k in archive.files if k != "__config__"})
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


__all__ = ["save_model", "load_model", "to_torch_state_dict", "load_torch_state_dict"]
