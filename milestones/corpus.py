"""The training text: a default corpus built from Python's own documentation, or a user's file.

The default corpus needs no download: it is made on the user's machine from text every Python
install has, then cached in the project's `data/` folder (see data/README.md). It is

- the docstrings (the English prose) of a fixed list of standard-library source files, read with
  `ast` from `sysconfig.get_paths()["stdlib"]`, in the order listed, and
- the prose of the language reference that `help()` shows (`pydoc_data.topics`), without its
  indented code examples.

Doctest lines (`>>>`, `...`) are dropped, characters outside printable ASCII are removed and runs
of blank lines are collapsed. The exact text depends a little on the Python version, so the cache
file is named after the version and the summary records the text's size and hash.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from milestones.errors import MilestoneError
from tinytorch.core.checkpoint import write_atomic

STDLIB_SOURCES = (
    "argparse", "collections/__init__", "difflib", "functools", "inspect", "json/__init__",
    "logging/__init__", "random", "statistics", "textwrap", "threading", "shutil", "subprocess",
    "tarfile", "unittest/case", "email/message", "configparser", "optparse", "smtplib", "codecs",
    "ipaddress", "traceback", "calendar", "turtle",
)  # fmt: skip
MIN_DEFAULT_CHARS = 50_000
DEFAULT_SOURCE = "Python's documentation"  # Corpus.source of the default corpus
VALIDATION_FRACTION = 0.1


@dataclass(frozen=True)
class Corpus:
    text: str
    source: str  # DEFAULT_SOURCE or the file path

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def normalise(text: str) -> str:
    """Printable ASCII and newlines only, no doctest lines, at most one blank line in a row."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith((">>>", "..."))]
    text = "\n".join(lines).replace("\t", "    ")
    text = "".join(ch for ch in text if ch == "\n" or " " <= ch <= "~")
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = [ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, kinds)]
    return [doc for doc in found if doc]


def reference_prose() -> list[str]:
    """The language reference's topics as `help()` shows them, without indented code examples."""
    try:
        from pydoc_data.topics import topics
    except ImportError:  # a Python installed without its documentation
        return []
    parts = []
    for name in sorted(topics):
        lines = [line for line in topics[name].splitlines() if not line.startswith("    ")]
        parts.append("\n".join(line.removeprefix("  ") for line in lines))
    return parts


def build_default_text() -> str:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts = []
    for name in STDLIB_SOURCES:
        path = stdlib / f"{name}.py"
        if path.is_file():
            parts.extend(docstrings(path))
    text = normalise("\n\n".join(parts + reference_prose()))
    if len(text) < MIN_DEFAULT_CHARS:
        raise MilestoneError(
            f"this Python's standard library holds only {len(text)} characters of documentation "
            "(a stripped Python install?)",
            hint="train on a text file of your own with --data FILE",
        )
    return text


def default_corpus(cache: Path | None = None) -> Corpus:
    """The default corpus (about 0.8 MB), read from `cache` when it was built there before."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    path = None if cache is None else cache / f"default-corpus-python{version}.txt"
    if path is not None and path.is_file():
        return Corpus(path.read_text(encoding="utf-8"), DEFAULT_SOURCE)
    text = build_default_text()
    if path is not None:
        try:
            write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))
        except OSError:
            pass  # a read-only project: build the text again next time
    return Corpus(text, DEFAULT_SOURCE)


def read_corpus(path: Path) -> Corpus:
    """A UTF-8 text file, checked: it exists, is text, and has at least two distinct characters."""
    if path.is_dir():
        raise MilestoneError(
            f"--data {path} is a folder, not a text file",
            hint="pass one UTF-8 text file inside it, e.g. --data DIR/book.txt",
        )
    if not path.is_file():
        raise MilestoneError(
            f"--data {path}: no such file", hint="pass the path of a UTF-8 text file"
        )
    raw = path.read_bytes()
    if not raw.strip():
        raise MilestoneError(
            f"--data {path} is empty", hint="pass a text file with some prose in it"
        )
    if b"\x00" in raw:
        raise MilestoneError(f"--data {path} is binary (it has NUL bytes)", hint="pass a text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MilestoneError(
            f"--data {path} is not UTF-8 text (bad byte at offset {err.start})",
            hint="convert it, e.g. `iconv -t utf-8`, or pass another file",
        ) from None
    if len(set(text)) < 2:
        raise MilestoneError(
            f"--data {path} has only one distinct character; there is nothing to learn",
            hint="pass a text file with varied prose",
        )
    return Corpus(text, str(path))


def split(
    tokens: np.ndarray, max_seq_len: int, seed: int, smaller: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation token arrays: a seeded choice of about 10% of equal blocks.

    The text is cut into at most 20 blocks of at least `max_seq_len + 2` tokens; the seed picks
    which blocks are held out, so the split is fixed for a given text and seed. `smaller` names
    a config with a shorter max_seq_len, for the hint when the text is too short (None: there
    is none).
    """
    n_blocks = min(20, len(tokens) // (max_seq_len + 2))
    if n_blocks < 2:
        raise MilestoneError(
            f"the text has {len(tokens)} tokens; max_seq_len {max_seq_len} needs at least "
            f"{2 * (max_seq_len + 2)}",
            hint="use a longer --data file"
            + (f" or a smaller config (--config {smaller})" if smaller else ""),
        )
    blocks = np.array_split(tokens, n_blocks)
    n_val = max(1, round(n_blocks * VALIDATION_FRACTION))
    held_out = set(np.random.default_rng(seed).choice(n_blocks, size=n_val, replace=False).tolist())
    train = np.concatenate([b for i, b in enumerate(blocks) if i not in held_out])
    val = np.concatenate([b for i, b in enumerate(blocks) if i in held_out])
    return train, val
