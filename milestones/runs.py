"""A GPT milestone run on disk: the checkpoint format, and `load_run` to read one back.

A run folder holds `checkpoint.npz`, written by module 07's `save_checkpoint`: the weights, the
optimizer's state, and under `extra` the run's metadata as UTF-8 JSON bytes (META_KEY, no
pickle). The metadata names the model's sizes (`config`, a GPTConfig plus the training
settings) and its tokenizer whole (`tokenizer`: the characters, or the byte-pair merges), so
`load_run` rebuilds the exact model and the tokenizer it was trained with. `tito model export`
and the milestones read runs through this file only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from milestones.errors import MilestoneError

CHECKPOINT = "checkpoint.npz"
META_KEY = "milestone_meta"  # run metadata as UTF-8 JSON bytes in a uint8 array (no pickle)


def tokenizer_record(tokenizer) -> dict:
    """A module-10 tokenizer as plain JSON data: what `tokenizer_from_record` rebuilds it from."""
    if hasattr(tokenizer, "merges"):
        return {"type": "bpe", "merges": [[int(a), int(b)] for a, b in tokenizer.merges]}
    return {"type": "char", "unk": bool(tokenizer.unk), "chars": "".join(tokenizer.chars)}


def tokenizer_from_record(record: dict):
    from tinytorch.text.tokenization import BPETokenizer, CharTokenizer

    if record.get("type") == "bpe":
        return BPETokenizer(record["merges"])
    if record.get("type") == "char":
        return CharTokenizer(record["chars"], unk=record.get("unk", False))
    raise MilestoneError(f"unknown tokenizer type {record.get('type')!r} in the run's metadata")


def meta_array(meta: dict) -> np.ndarray:
    """The metadata as the checkpoint stores it."""
    return np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)


def checkpoint_path(path) -> Path:
    """A run folder's checkpoint, or the file itself."""
    path = Path(path)
    return path / CHECKPOINT if path.is_dir() else path


def read_meta(path) -> dict:
    """The run metadata stored in a checkpoint, or a MilestoneError if it is not a readable one."""
    path = checkpoint_path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            key = next(k for k in archive.files if k.endswith(META_KEY))
            return json.loads(archive[key].tobytes().decode())
    except Exception as err:  # noqa: BLE001 - any failure here means a damaged file
        raise MilestoneError(
            f"checkpoint {path} is damaged or not a milestone checkpoint ({type(err).__name__})",
            hint="start afresh without --resume (the damaged file is kept as it is)",
        ) from None


@dataclass
class Run:
    model: object  # tinytorch.models.transformer.GPT
    tokenizer: object  # CharTokenizer or BPETokenizer, the one the run trained with
    meta: dict


def _tokenizer(meta: dict, path: Path):
    if "tokenizer" in meta:
        return tokenizer_from_record(meta["tokenizer"])
    vocab = meta.get("vocab", "")
    if vocab.startswith("bpe "):  # written before runs kept their merges
        raise MilestoneError(
            f"{path} is a BPE run from before checkpoints kept the tokenizer's merges",
            hint="train it again with `tito milestone run gpt` (add --resume to keep training)",
        )
    from tinytorch.text.tokenization import CharTokenizer

    return CharTokenizer(vocab)  # a character run's fingerprint is its characters


def load_run(path) -> Run:
    """The model, its real tokenizer and the metadata of a run folder or its checkpoint.npz."""
    from tinytorch.core.training import split_checkpoint
    from tinytorch.models.transformer import GPT, GPTConfig

    path = checkpoint_path(path)
    if not path.is_file():
        raise MilestoneError(
            f"no checkpoint at {path}",
            hint="train one with `tito milestone run gpt` (it writes runs/gpt/checkpoint.npz)",
        )
    meta = read_meta(path)
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    weights = split_checkpoint(arrays)[0]
    sizes = {f.name for f in fields(GPTConfig)}
    config = GPTConfig(**{k: v for k, v in meta["config"].items() if k in sizes})
    model = GPT(**{f.name: getattr(config, f.name) for f in fields(GPTConfig)})
    model.load_state_dict(weights)
    return Run(model, _tokenizer(meta, path), meta)
