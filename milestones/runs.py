"""A GPT milestone run on disk: the checkpoint format, and `load_run` to read one back.

A run folder (what `tito milestone run gpt` writes) holds `checkpoint.npz`, written by module 07's
`save_checkpoint`: the weights, the optimizer's state, and under `extra` the run's metadata as
UTF-8 JSON bytes (META_KEY, no pickle). The metadata names the configuration, the corpus (its
source and SHA-256), the tokenizer whole (`tokenizer`: the characters or the byte-pair merges) and
its fingerprint. `load_run` gives back the model and the tokenizer it was trained with, checked
against that fingerprint, so a run is never read with another vocabulary than the one it learned;
a run from before checkpoints kept the tokenizer has it rebuilt from the same corpus. The
milestones, `tito model export` and the olympics read runs through this file only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from milestones import tokens
from milestones.corpus import DEFAULT_SOURCE, Corpus, default_corpus, read_corpus
from milestones.errors import MilestoneError
from tinytorch.core.training import load_checkpoint, read_checkpoint
from tinytorch.core.transformer import GPT, GPTConfig

CHECKPOINT = "checkpoint.npz"
META_KEY = "milestone_meta"  # run metadata as UTF-8 JSON bytes in a uint8 array (no pickle)


def meta_array(meta: dict) -> np.ndarray:
    """The metadata as the checkpoint stores it."""
    return np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)


def read_meta(path) -> dict:
    """The run metadata stored in a checkpoint, or a MilestoneError if it is not a readable one."""
    path = checkpoint_path(path)
    try:
        _, _, _, extra, _ = read_checkpoint(path)
        return json.loads(np.asarray(extra[META_KEY]).tobytes().decode())
    except Exception as err:  # noqa: BLE001 - any failure here means a damaged file
        raise MilestoneError(
            f"checkpoint {path} is damaged or not a milestone checkpoint ({type(err).__name__})",
            hint="start afresh without --resume (the damaged file is kept as it is)",
        ) from None


def checkpoint_path(path) -> Path:
    """A run folder's checkpoint, or the file itself."""
    path = Path(path)
    return path / CHECKPOINT if path.is_dir() else path


def progress(path) -> tuple[int, int] | None:
    """(steps trained, steps planned) of the run in a folder (or checkpoint file); None when
    there is no checkpoint. A run is finished when the two are equal."""
    path = checkpoint_path(path)
    if not path.is_file():
        return None
    planned = read_meta(path).get("steps")
    with np.load(path, allow_pickle=False) as archive:
        step = int(archive["step"]) if "step" in archive.files else 0
    return step, int(planned) if isinstance(planned, int) else step


def finished(path) -> bool:
    """True when the folder (or checkpoint file) holds a run that trained all its steps."""
    done = progress(path)
    return done is not None and done[0] >= done[1]


def require_finished(path, allow_partial: bool = False) -> None:
    """A MilestoneError naming the step when the run at `path` stopped before its last step,
    unless `allow_partial` (the caller's --allow-partial) says to use it as it is."""
    done = progress(path)
    if allow_partial or done is None or done[0] >= done[1]:
        return
    folder = checkpoint_path(path).parent
    raise MilestoneError(
        f"the run in {folder} is unfinished: its checkpoint is step {done[0]} of {done[1]}",
        hint=f"finish it with `tito milestone run gpt --out {folder} --resume`, or pass "
        "--allow-partial to use it as it is",
    )


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


@dataclass
class Run:
    folder: Path
    model: GPT
    vocab: tokens.Tokens
    meta: dict
    corpus: Corpus  # the text it was trained on, as it is now (checked by its SHA-256)

    @property
    def config(self) -> GPTConfig:
        return config_of(self.meta)

    @property
    def tokenizer(self):
        """The module-10 tokenizer itself (CharTokenizer or BPETokenizer)."""
        return self.vocab.tokenizer


def config_of(meta: dict) -> GPTConfig:
    """The model configuration stored in a run's metadata."""
    stored = meta.get("config", {})
    names = {f.name for f in fields(GPTConfig)}
    return GPTConfig(**{k: v for k, v in stored.items() if k in names})


def build_model(meta: dict):
    """The untrained model a run's metadata describes: module 13's GPT, or module 21's Llama
    for a run of `tito milestone run llama` (imported only then)."""
    if meta.get("architecture") == "llama":
        from tinytorch.models.llama import Llama, LlamaConfig

        names = {f.name for f in fields(LlamaConfig)}
        return Llama(**{k: v for k, v in meta["config"].items() if k in names})
    return GPT.from_config(config_of(meta))


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
    record = meta.get("tokenizer")
    if isinstance(record, dict) and len(record.get("merges") or record.get("chars") or "") > 8192:
        raise MilestoneError("the run's stored tokenizer is larger than 8192 entries")
    if stored.get("tokenizer", "char") not in tokens.KINDS:
        raise MilestoneError(f"the run's tokenizer {stored.get('tokenizer')!r} is unknown")


def load_run(folder: Path, data_dir: Path | None = None, untrusted: bool = False) -> Run:
    """The trained model and its tokenizer from a run folder (or its checkpoint file);
    `untrusted` (a submission) bounds what the file may ask for (check_untrusted)."""
    folder = Path(folder)
    path = checkpoint_path(folder)
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
    if isinstance(meta.get("tokenizer"), dict):  # kept whole since checkpoints store it
        vocab = tokens.wrap(tokenizer_from_record(meta["tokenizer"]))
    else:
        vocab = tokens.build(
            setup.get("tokenizer", "char"), corpus, setup.get("bpe_vocab", 0), data_dir
        )
    if vocab.fingerprint != meta.get("vocab"):
        raise MilestoneError(
            f"the tokenizer rebuilt for {folder} is not the one it was trained with",
            hint="train the run again with this version of the course",
        )
    model = build_model(meta)
    load_checkpoint(path, model)
    model.eval()
    return Run(path.parent, model, vocab, meta, corpus)
