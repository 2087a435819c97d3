"""A finished GPT run read back: the model with its weights and the tokenizer it was trained with.

A run folder (what `tito milestone run gpt` writes) holds `checkpoint.npz`, whose metadata names
the configuration, the corpus (its source and SHA-256) and the tokenizer's fingerprint. The
tokenizer is rebuilt from the same corpus and checked against that fingerprint, so a run is never
read with another vocabulary than the one it learned.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from milestones import tokens
from milestones.corpus import DEFAULT_SOURCE, default_corpus, read_corpus
from milestones.errors import MilestoneError
from milestones.training import CHECKPOINT, read_meta
from tinytorch.core.training import load_checkpoint
from tinytorch.core.transformer import GPT, GPTConfig


@dataclass
class Run:
    folder: Path
    model: GPT
    vocab: tokens.Tokens
    meta: dict

    @property
    def config(self) -> GPTConfig:
        return config_of(self.meta)


def config_of(meta: dict) -> GPTConfig:
    """The model configuration stored in a run's metadata."""
    stored = meta.get("config", {})
    names = {f.name for f in fields(GPTConfig)}
    return GPTConfig(**{k: v for k, v in stored.items() if k in names})


def load_run(folder: Path, data_dir: Path | None = None) -> Run:
    """The trained model and its tokenizer from a run folder (or its checkpoint file)."""
    folder = Path(folder)
    path = folder / CHECKPOINT if folder.is_dir() else folder
    if not path.is_file():
        raise MilestoneError(
            f"no trained run at {folder} (no {CHECKPOINT})",
            hint="train one with `tito milestone run gpt` (or --quick), then pass its folder",
        )
    meta = read_meta(path)
    setup = meta.get("config", {})
    source = meta.get("corpus_source")
    corpus = default_corpus(data_dir) if source == DEFAULT_SOURCE else read_corpus(Path(source))
    if corpus.sha256 != meta.get("corpus_sha256"):
        raise MilestoneError(
            f"the run in {folder} was trained on a text that is no longer the same ({source})",
            hint="use the corpus it was trained on, or train the run again",
        )
    vocab = tokens.build(
        setup.get("tokenizer", "char"), corpus, setup.get("bpe_vocab", 0), data_dir
    )
    if vocab.fingerprint != meta.get("vocab"):
        raise MilestoneError(
            f"the tokenizer rebuilt for {folder} is not the one it was trained with",
            hint="train the run again with this version of the course",
        )
    model = GPT.from_config(config_of(meta))
    load_checkpoint(path, model)
    model.eval()
    return Run(path.parent, model, vocab, meta)
