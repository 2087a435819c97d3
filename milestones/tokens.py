"""The tokenizers the GPT milestone trains with: characters, or the course's byte-pair encoding.

Both come from module 10. A character model predicts one character per step; a BPE model one
token of a few characters, so it sees more text per step and writes whole words. Their losses
per token do not compare, so runs report bits per character too: the validation loss in bits per
token times tokens per character of the validation text.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from milestones.corpus import Corpus
from milestones.errors import MilestoneError
from tinytorch.text.tokenization import BPETokenizer, CharTokenizer

KINDS = ("char", "bpe")


@dataclass(frozen=True)
class Tokens:
    """A trained tokenizer and what a run needs from it."""

    kind: str
    tokenizer: CharTokenizer | BPETokenizer
    fingerprint: str  # the vocabulary (characters), or a hash of the merges; --resume compares it

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def encode(self, text: str) -> np.ndarray:
        if self.kind == "char":
            return np.asarray(self.tokenizer.encode_array(text), dtype=np.int64)
        return np.asarray(self.tokenizer.encode(text), dtype=np.int64)

    def decode(self, ids) -> str:
        return self.tokenizer.decode(np.asarray(ids).tolist())

    def pieces(self, ids) -> list[str]:
        """Each token's own text, for labelling plots."""
        return [self.tokenizer.decode([int(i)]) for i in ids]


def build(kind: str, corpus: Corpus, bpe_vocab: int, cache: Path | None) -> Tokens:
    """The tokenizer of a run; BPE merges are learned once per corpus and kept in `cache`."""
    if kind not in KINDS:
        hint = f"choose one of: {', '.join(KINDS)}"
        raise MilestoneError(f"unknown --tokenizer '{kind}'", hint=hint)
    if kind == "char":
        return wrap(CharTokenizer.from_text(corpus.text))
    bpe = _cached_bpe(cache / f"bpe-{bpe_vocab}-{corpus.sha256[:16]}.json" if cache else None)
    if bpe is None:
        bpe = BPETokenizer().train(corpus.text, vocab_size=bpe_vocab)
        if cache is not None:
            try:
                cache.mkdir(parents=True, exist_ok=True)
                bpe.save(cache / f"bpe-{bpe_vocab}-{corpus.sha256[:16]}.json")
            except OSError:
                pass  # a read-only data folder: learn the merges again next time
    return wrap(bpe)


def wrap(tokenizer: CharTokenizer | BPETokenizer) -> Tokens:
    """A trained tokenizer with its kind and fingerprint (the one definition of both)."""
    if isinstance(tokenizer, BPETokenizer):
        merges = repr([tuple(pair) for pair in tokenizer.merges]).encode()
        return Tokens("bpe", tokenizer, "bpe " + hashlib.sha256(merges).hexdigest())
    return Tokens("char", tokenizer, "".join(tokenizer.vocab))


def _cached_bpe(path: Path | None) -> BPETokenizer | None:
    if path is None or not path.is_file():
        return None
    try:
        return BPETokenizer.load(path)
    except (ValueError, OSError):
        return None  # damaged: learn the merges again and overwrite it


def bits_per_char(loss: float, tokens: int, chars: int) -> float:
    """A loss in nats per token as bits per character of the text those tokens spell."""
    return loss / math.log(2) * tokens / chars
