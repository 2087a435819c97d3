"""Was an entry trained on the held-out text? The olympics' memorisation test.

The default held-out text (milestones/olympics.py, `heldout_text`) ships with Python, so any
student could train on it, and nothing in a run shows what it was trained on. The tool therefore
tests the model itself: it scores the held-out text as it is, and again with its sentences in a
random order drawn afresh at every measurement (from the system's entropy, so no entry can have
seen that order). Shuffling sentences keeps what an honest model learned from other text (the
characters, the words, how a sentence of documentation reads) and breaks every sequence longer
than a sentence. An honest model barely notices: a sentence's start is where it knew least
anyway. A model that learned the held-out text in order predicted each sentence's start from the
one before it, with confidence; in the shuffled text that confidence goes to the wrong
characters, and it loses more.

The gap, shuffled minus in-order bits per character, is the test: above GAP_BOUND the entry
counts as trained on the held-out text, a violation that scores 0. The bound and what it cannot
see come from measured runs (README, "The Torch Olympics"; docs/instructor.md section 8).
"""

from __future__ import annotations

import re

import numpy as np

GAP_BOUND = 0.04  # bits/char, shuffled minus in order: above it the text was learned in order

# a sentence: up to and including the whitespace after its . ! ? or :, or a paragraph's end
SENTENCE = re.compile(r".+?(?:[.!?:]\s+|\n\n+|$)", re.S)


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence's closing whitespace: joined, they give `text` back."""
    return SENTENCE.findall(text)


def shuffled_sentences(text: str, rng: np.random.Generator) -> str:
    """`text`'s sentences in the random order `rng` draws; each keeps its own closing
    whitespace (a sentence that ended the text gets one newline)."""
    parts = sentences(text)
    order = rng.permutation(len(parts))
    return "".join(p if p[-1:].isspace() else p + "\n" for p in (parts[i] for i in order))


def memorised(bits_per_char: float, shuffled_bits_per_char: float | None) -> str | None:
    """The one-line reason why an entry with these held-out scores counts as trained on the
    held-out text, or None. No shuffled score (a record from before the test) is no finding."""
    if shuffled_bits_per_char is None:
        return None
    gap = shuffled_bits_per_char - bits_per_char
    if gap <= GAP_BOUND:
        return None
    return (
        f"trained on the held-out text: with its sentences shuffled it scores "
        f"{shuffled_bits_per_char:.3f} bits/char against {bits_per_char:.3f} in order, a gap of "
        f"{gap:.3f} over the bound {GAP_BOUND} (an honest model barely notices the order)"
    )


__all__ = ["GAP_BOUND", "sentences", "shuffled_sentences", "memorised"]
