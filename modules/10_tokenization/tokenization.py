# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Module 10 — Tokenization
#
# A language model reads integers, not text. A tokenizer is the two-way map between them:
# `encode(str) -> list[int]` and `decode(ids) -> str`, with `decode(encode(s)) == s`.
#
# **Characters.** The simplest vocabulary is the set of characters in the training text. It is
# tiny (65 symbols for Shakespeare) and every string of known characters round-trips, but a
# sequence is as long as the text, and a character the vocabulary never saw has no id. Silently
# dropping it would corrupt data, so the policy is explicit: by default encoding raises an error
# naming the character; with `unk=True`, id 0 is reserved for `<unk>` and unknown characters map
# to it (decoding it gives U+FFFD, the standard replacement character).
#
# **Byte-pair encoding.** GPT-2 starts from the 256 possible bytes of UTF-8, so *any* text has an
# encoding and nothing is ever unknown. Training then repeats one step: find the most frequent
# adjacent pair of ids and give it a new id. Frequent words become single tokens; rare text
# falls back to pieces and, at worst, to bytes. Encoding replays the learned merges in the order
# they were learned, and decoding concatenates each token's bytes.
#
# Two practical points:
# - Merges should not glue the end of one word to the start of the next, so the text is first cut
#   into chunks (a word with its leading space, a run of punctuation, a run of white space) and
#   pairs are counted only inside chunks. In one id array the chunks are separated by -1.
# - Counting and merging are array operations: `np.unique` counts all pairs at once, and a
#   boolean mask finds every occurrence of the chosen pair. No Python loop runs over the text.

# %%
#| default_exp text.tokenization

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

UNK_TOKEN = "<unk>"
REPLACEMENT = "\ufffd"  # what decoding shows for <unk>


def _as_ids(ids, vocab_size: int) -> np.ndarray:
    """Validate token ids (list, numpy array or Tensor) and return them as an int64 array."""
    if hasattr(ids, "numpy"):  # a Tensor
        ids = ids.numpy()
    array = np.asarray(ids)
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.ndim != 1:
        raise ValueError(f"decode takes a 1-D sequence of ids, got shape {array.shape}")
    if array.dtype.kind not in "iuf" or not np.all(array == np.round(array)):
        raise TypeError("decode takes integer token ids")
    array = array.astype(np.int64)
    bad = array[(array < 0) | (array >= vocab_size)]
    if bad.size:
        raise ValueError(
            f"token id {bad[0]} is out of range for a vocabulary of {vocab_size}; "
            "decode ids produced by this tokenizer"
        )
    return array


def _codepoints(text: str) -> np.ndarray:
    """The Unicode code points of `text` as a uint32 array, without a Python loop."""
    if not isinstance(text, str):
        raise TypeError(f"encode takes a str, got {type(text).__name__}")
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _from_codepoints(points: np.ndarray) -> str:
    return points.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")


def _read_json(path, kind: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read tokenizer file {path}: {err}") from None
    if not isinstance(data, dict) or data.get("type") != kind:
        raise ValueError(f"{path} is not a saved {kind} tokenizer")
    return data


# %% [markdown]
# ## `CharTokenizer`
#
# The vocabulary is the sorted list of distinct characters (sorted so that the same text always
# gives the same ids). Encoding looks every character up at once: keep the vocabulary's code
# points in a sorted array and `np.searchsorted` the text's code points into it; a position whose
# code point differs from the one found is an unknown character. Decoding indexes the code-point
# array with the ids and turns the result back into a string.


# %% nbgrader={"grade": false, "grade_id": "char-tokenizer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class CharTokenizer:
    """One id per character of a fixed vocabulary, with an explicit unknown-character policy."""

    def __init__(self, chars=(), unk: bool = False):
        chars = sorted(set(chars))
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise ValueError("CharTokenizer vocabulary must be single characters")
        self.unk = bool(unk)
        self.chars = chars
        # the sorted code points; with unk, id 0 is <unk> and ids of characters shift by one
        self._points = np.array([ord(c) for c in chars], dtype=np.uint32)
        self._offset = 1 if self.unk else 0

    @classmethod
    def from_text(cls, text: str, unk: bool = False) -> CharTokenizer:
        """The tokenizer whose vocabulary is every distinct character of `text`."""
        _codepoints(text)  # type check
        return cls(set(text), unk=unk)

    def build_vocab(self, texts) -> CharTokenizer:
        """Make the vocabulary every character of `texts` (a str, or several); returns self.

        The TinyTorch book's spelling of `from_text`: `tok = CharTokenizer(); tok.build_vocab(corpus)`.
        """
        texts = [texts] if isinstance(texts, str) else list(texts)
        for text in texts:
            _codepoints(text)  # type check
        self.__init__(set().union(*texts), unk=self.unk)
        return self

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + self._offset

    @property
    def vocab(self) -> list[str]:
        """The string of every id, in id order."""
        return ([UNK_TOKEN] if self.unk else []) + self.chars

    def encode_array(self, text: str) -> np.ndarray:
        """Encode to an int64 array (fast path for whole corpora)."""
        points = _codepoints(text)
        ### BEGIN SOLUTION
        pos = np.searchsorted(self._points, points)
        pos = np.minimum(pos, max(len(self._points) - 1, 0))
        known = self._points[pos] == points if len(self._points) else np.zeros(len(points), bool)
        ids = pos.astype(np.int64) + self._offset
        ### END SOLUTION
        if not known.all():
            first = int(np.argmin(known))
            if not self.unk:
                raise ValueError(
                    f"character {text[first]!r} (U+{ord(text[first]):04X}) at position {first} "
                    "is not in the vocabulary; build the tokenizer from text that contains it "
                    "or use unk=True"
                )
            ### BEGIN SOLUTION
            ids[~known] = 0
            ### END SOLUTION
        return ids

    def encode(self, text: str) -> list[int]:
        return self.encode_array(text).tolist()

    def decode(self, ids) -> str:
        ids = _as_ids(ids, self.vocab_size)
        ### BEGIN SOLUTION
        table = self._points
        if self.unk:
            table = np.concatenate([[ord(REPLACEMENT)], table]).astype(np.uint32)
        return _from_codepoints(table[ids])
        ### END SOLUTION

    def save(self, path) -> None:
        data = {"type": "char", "unk": self.unk, "chars": "".join(self.chars)}
        Path(path).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path) -> CharTokenizer:
        data = _read_json(path, "char")
        return cls(data["chars"], unk=data.get("unk", False))


# %% [markdown]
# ## Byte-pair encoding: the two array operations
#
# `count_pairs(ids)` returns the most frequent adjacent pair and its count, ignoring pairs that
# touch a -1 separator. Pack each pair into one integer `left * base + right` (with `base`
# larger than any id) so `np.unique(..., return_counts=True)` counts them all; ties go to the
# smallest pair, which keeps training deterministic.
#
# `merge(ids, pair, new_id)` replaces every occurrence of `pair`, left to right, by `new_id`.
# Occurrences of `(a, b)` with `a != b` never overlap. With `a == b` they do: in `a a a` the
# pair occurs at 0 and 1, and only the first may merge. Within each run of consecutive
# positions keep every other one, counted from the run's start.


# %% nbgrader={"grade": false, "grade_id": "bpe-ops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def count_pairs(ids: np.ndarray, base: int) -> tuple[tuple[int, int] | None, int]:
    """The most frequent adjacent pair (not across -1 separators) and its count."""
    left, right = ids[:-1], ids[1:]
    ### BEGIN SOLUTION
    inside = (left >= 0) & (right >= 0)
    codes = left[inside] * base + right[inside]
    if codes.size == 0:
        return None, 0
    unique, counts = np.unique(codes, return_counts=True)
    best = int(np.argmax(counts))  # first maximum: the smallest pair among ties
    return divmod(int(unique[best]), base), int(counts[best])
    ### END SOLUTION


def merge(ids: np.ndarray, pair: tuple[int, int], new_id: int) -> np.ndarray:
    """Replace each occurrence of `pair` (left to right, non-overlapping) with `new_id`."""
    a, b = pair
    ### BEGIN SOLUTION
    pos = np.flatnonzero((ids[:-1] == a) & (ids[1:] == b))
    if pos.size == 0:
        return ids
    if a == b:
        rank = np.arange(pos.size)
        run_start = np.maximum.accumulate(np.where(np.diff(pos, prepend=-2) != 1, rank, 0))
        pos = pos[(rank - run_start) % 2 == 0]
    out = ids.copy()
    out[pos] = new_id
    keep = np.ones(ids.size, dtype=bool)
    keep[pos + 1] = False
    return out[keep]
    ### END SOLUTION


# %% [markdown]
# ## `BPETokenizer`
#
# `train(text, vocab_size)` learns `vocab_size - 256` merges (fewer if the text runs out of pairs
# seen at least twice). Merge `k` creates id `256 + k`, whose bytes are the bytes of its two
# parts. `encode` splits and byte-encodes the text the same way, then applies every merge in
# order: a merge can only create pairs involving its new id, whose merges come later, so one pass
# in order gives the same result as repeatedly taking the earliest applicable merge. `decode`
# joins the bytes of the ids and decodes UTF-8 (a cut multi-byte character, which a sampling
# model can produce, shows as U+FFFD rather than failing).

# %% nbgrader={"grade": false, "grade_id": "bpe-tokenizer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
CHUNK = re.compile(r" ?\w+| ?[^\w\s]+|\s+(?!\S)|\s+")  # words keep their leading space


class BPETokenizer:
    """Byte-level byte-pair encoding: 256 byte ids plus learned merges, applied in order."""

    def __init__(self, merges=()):
        self.merges: list[tuple[int, int]] = []
        self.vocab: list[bytes] = [bytes([i]) for i in range(256)]
        for a, b in merges:
            self._add_merge(int(a), int(b))

    def _add_merge(self, a: int, b: int) -> None:
        if not (0 <= a < len(self.vocab) and 0 <= b < len(self.vocab)):
            raise ValueError(f"merge ({a}, {b}) uses an id that does not exist yet")
        self.merges.append((a, b))
        self.vocab.append(self.vocab[a] + self.vocab[b])

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @staticmethod
    def _bytes(text: str) -> np.ndarray:
        """UTF-8 bytes of `text` as int64 ids, with -1 between chunks so no merge crosses them."""
        if not isinstance(text, str):
            raise TypeError(f"expected a str, got {type(text).__name__}")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"text is not valid Unicode ({err.reason}); clean it first") from None
        ids = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
        points = _codepoints(text)
        utf8_len = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
        char_ends = np.array([m.end() for m in CHUNK.finditer(text)][:-1], dtype=np.int64)
        byte_ends = np.cumsum(utf8_len)[char_ends - 1] if char_ends.size else char_ends
        return np.insert(ids, byte_ends, -1)

    def train(self, text: str, vocab_size: int) -> BPETokenizer:
        """Learn merges from `text` until the vocabulary has `vocab_size` ids."""
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256:
            raise ValueError(
                f"vocab_size must be an integer of at least 256 (the byte ids), got {vocab_size}"
            )
        self.__init__()  # training starts from the 256 bytes
        ids = self._bytes(text)
        ### BEGIN SOLUTION
        while self.vocab_size < vocab_size:
            pair, count = count_pairs(ids, base=vocab_size)
            if count < 2:
                break  # no pair repeats: a merge would only memorise the text
            new_id = self.vocab_size
            self._add_merge(*pair)
            ids = merge(ids, pair, new_id)
        ### END SOLUTION
        return self

    def encode(self, text: str) -> list[int]:
        ids = self._bytes(text)
        ### BEGIN SOLUTION
        for k, pair in enumerate(self.merges):
            ids = merge(ids, pair, 256 + k)
        return ids[ids >= 0].tolist()
        ### END SOLUTION

    def decode(self, ids) -> str:
        ids = _as_ids(ids, self.vocab_size)
        ### BEGIN SOLUTION
        data = b"".join(map(self.vocab.__getitem__, ids.tolist()))
        return data.decode("utf-8", errors="replace")
        ### END SOLUTION

    def save(self, path) -> None:
        data = {"type": "bpe", "merges": [list(pair) for pair in self.merges]}
        Path(path).write_text(json.dumps(data), encoding="utf-8")

    @classmethod
    def load(cls, path) -> BPETokenizer:
        return cls(_read_json(path, "bpe")["merges"])


# %% [markdown]
# ## Try it

# %%
sample = "the cat sat on the mat. the cat ate the rat. " * 20
bpe = BPETokenizer().train(sample, vocab_size=280)
print(len(sample.encode()), len(bpe.encode(sample)), [bpe.vocab[i] for i in bpe.encode("the cat")])

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


def text_numbers(text: str) -> np.ndarray:
    """A string as numbers (its UTF-8 bytes), so a grader can compare it."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def random_text(rng, words, count: int) -> str:
    return " ".join(rng.choice(words, size=count)) + rng.choice([".", "!", " ?", ""])


# %% nbgrader={"grade": true, "grade_id": "test-char", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="char-tokenizer")
def test_char_round_trip_and_unknown(rng):
    tok = CharTokenizer.from_text("hello world")
    assert tok.vocab_size == 8 and tok.encode("lol") == [4, 5, 4]
    assert tok.decode(tok.encode("hello")) == "hello"
    try:
        tok.encode("help")
    except ValueError as err:
        assert "'p'" in str(err)
    else:
        raise AssertionError("an unknown character must raise by default")
    lenient = CharTokenizer.from_text("hello world", unk=True)
    assert lenient.encode("hp") == [lenient.encode("h")[0], 0]
    text = random_text(rng, ["ab", "cab", "zéa", "bed", "x"], 20)
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    lenient = CharTokenizer.from_text(text[: len(text) // 2], unk=True)
    unknown = lenient.encode(text)
    return {
        "ids": np.array(ids),
        "size": np.array([tok.vocab_size, lenient.vocab_size]),
        "unknown": np.array(unknown),
        "decoded": text_numbers(lenient.decode(unknown)),
    }


# %% nbgrader={"grade": true, "grade_id": "test-bpe", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades=("bpe-ops", "bpe-tokenizer"))
def test_bpe_merges_and_round_trip(rng):
    assert merge(np.array([1, 1, 1, 2, 1, 1]), (1, 1), 9).tolist() == [9, 1, 2, 9]
    text = "low lower lowest " * 30
    tok = BPETokenizer().train(text, vocab_size=260)
    assert len(tok.merges) == 4 and len(tok.encode(text)) < len(text) // 2
    whole = BPETokenizer().train(text, vocab_size=400)  # stops once every chunk is one token
    assert len(whole.encode(text)) == len(CHUNK.findall(text)) and whole.vocab_size < 400
    for s in (text, "unseen: żółw 猫 🙂"):
        assert tok.decode(tok.encode(s)) == s
    ids = rng.integers(0, 4, size=40)
    pair = (int(ids[3]), int(ids[4]))
    pair_count = count_pairs(np.r_[ids[:20], -1, ids[20:]], base=10)
    text = random_text(rng, ["low", "lower", "newest", "wide", "ab", "aaa"], 60)
    tok = BPETokenizer().train(text, vocab_size=256 + int(rng.integers(5, 30)))
    probe = random_text(rng, ["lowest", "wider", "zzz", "aaaa"], 8)
    encoded = tok.encode(probe)
    assert tok.decode(encoded) == probe
    return {
        "merged": merge(ids, pair, 9),
        "pair": np.array([*pair_count[0], pair_count[1]]),
        "merges": np.array(tok.merges).reshape(-1, 2),
        "encoded": np.array(encoded),
    }
