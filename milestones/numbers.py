"""A parallel corpus made on the spot: English number words and their digits.

"three thousand and seventeen" -> "3017". Word order and digit order disagree in instructive
places: "seventeen" is one word that writes two digits, "seventy" writes one, "hundred" and
"thousand" write no digit of their own but tell where the next ones go, and a zero is written
where a word is absent. Nothing is downloaded; the same seed always gives the same split.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen").split()  # fmt: skip
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()

PAD, START, END = 0, 1, 2  # PAD fills short rows; START begins a target; END finishes it
SPECIALS = ("<pad>", "<s>", "</s>")
DIGITS = tuple("0123456789")
WORDS = tuple(ONES + TENS[2:] + ["hundred", "thousand", "and"])
VOCAB = SPECIALS + DIGITS + WORDS  # one table for both sides: the model has one vocabulary
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
LARGEST = 9999
MAX_SOURCE_LEN = 7  # "seven thousand seven hundred and seventy seven"
MAX_TARGET_LEN = 6  # START, four digits, END


def below_hundred(n: int) -> list[str]:
    if n < 20:
        return [ONES[n]]
    return [TENS[n // 10]] + ([ONES[n % 10]] if n % 10 else [])


def words(n: int) -> list[str]:
    """British English words for 0 <= n <= 9999: 312 -> three hundred and twelve."""
    if not 0 <= n <= LARGEST:
        raise ValueError(f"words() covers 0 to {LARGEST}, got {n}")
    if n == 0:
        return ["zero"]
    out = []
    thousands, hundreds, rest = n // 1000, n // 100 % 10, n % 100
    if thousands:
        out += [ONES[thousands], "thousand"]
    if hundreds:
        out += [ONES[hundreds], "hundred"]
    if rest:
        out += (["and"] if out else []) + below_hundred(rest)
    return out


def encode(tokens: list[str]) -> list[int]:
    return [TOKEN_ID[t] for t in tokens]


def decode(ids) -> str:
    """The digits of a generated row: what follows START, up to END (specials dropped)."""
    text = []
    for i in ids:
        if i == END:
            break
        if i >= len(SPECIALS):
            text.append(VOCAB[i])
    return "".join(text)


@dataclass(frozen=True)
class Batch:
    source: np.ndarray  # (B, S) word ids, padded with PAD to the longest row
    source_lengths: np.ndarray  # (B,) real words per row: what padding_mask hides beyond
    target: np.ndarray  # (B, T) START digits END, padded with PAD

    @property
    def decoder_input(self) -> np.ndarray:
        return self.target[:, :-1]  # (B, T - 1)

    @property
    def labels(self) -> np.ndarray:
        return self.target[:, 1:]  # (B, T - 1): the next token at every position; PAD is ignored


def pad(rows: list[list[int]]) -> np.ndarray:
    out = np.full((len(rows), max(len(r) for r in rows)), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def batch(numbers) -> Batch:
    """Source words and START-digits-END targets for these numbers, padded to the longest row."""
    sources = [encode(words(int(n))) for n in numbers]
    targets = [[START] + encode(list(str(int(n)))) + [END] for n in numbers]
    lengths = np.array([len(s) for s in sources], dtype=np.int64)
    return Batch(pad(sources), lengths, pad(targets))


def split(seed: int, test_size: int) -> tuple[np.ndarray, np.ndarray]:
    """All numbers 0..9999 shuffled by `seed`: (train, test), disjoint, test never trained on."""
    if not 0 < test_size < LARGEST:
        raise ValueError(f"test_size must be in 1..{LARGEST - 1}, got {test_size}")
    numbers = np.random.default_rng([seed, 17]).permutation(LARGEST + 1)
    return np.sort(numbers[test_size:]), np.sort(numbers[:test_size])
