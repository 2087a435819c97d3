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


# What a run from someone else (a student's submission) may ask to be built: far above the
# course's presets, far below what would exhaust the grading machine.
UNTRUSTED_BYTES = 256 * 2**20
UNTRUSTED_LIMITS = {"vocab_size": 8192, "embed_dim": 1024, "num_layers": 24, "num_heads": 32,
                    "max_seq_len": 1024, "bpe_vocab": 8192}  # fmt: skip


def check_untrusted(path: Path, meta: dict) -> None:
    """A submitted run: a bounded file, the default corpus (no path of the submitter's choosing
    is read) and a model within UNTRUSTED_LIMITS."""
    if path.stat().st_size > UNTRUSTED_BYTES:
        raise MilestoneError(f"{path.name} is larger than {UNTRUSTED_BYTES >> 20} MB")
    if meta.get("corpus_source") != DEFAULT_SOURCE:
        raise MilestoneError("the run was not trained on the default corpus")
    stored = meta.get("config")
    if not isinstance(stored, dict):
        raise MilestoneError("the run's metadata holds no configuration")
    for key, limit in UNTRUSTED_LIMITS.items():
        value = stored.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= limit:
            raise MilestoneError(f"the run's {key} {value!r} is outside 1..{limit}")
    if stored.get("tokenizer", "char") not in tokens.KINDS:
        raise MilestoneError(f"the run's tokenizer {stored.get('tokenizer')!r} is unknown")


def load_run(folder: Path, data_dir: Path | None = None, untrusted: bool = False) -> Run:
    """The trained model and its tokenizer from a run folder (or its checkpoint file);
    `untrusted` (a submission) bounds what the file may ask for (check_untrusted)."""
    folder = Path(folder)
    path = folder / CHECKPOINT if folder.is_dir() else folder
    if not path.is_file():
        raise MilestoneError(
            f"no trained run at {folder} (no {CHECKPOINT})",
            hint="train one with `tito milestone run gpt` (or --quick), then pass its folder",
        )
    meta = read_meta(path)
    if untrusted:
        check_untrusted(path, meta)
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
