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
# # Module 08 — DataLoader
#
# A training loop wants the same thing over and over: "give me the next batch". Two small
# objects split that job.
#
# - A **`Dataset`** knows how many samples there are and how to fetch sample `i`
#   (`__len__` and `__getitem__`). It says nothing about order or batching.
# - A **`DataLoader`** decides the order (shuffled or not), groups indices into batches and
#   stacks the samples of a batch into arrays.
#
# **Why shuffle, and why a seed?** Gradient descent assumes each batch is a fair sample of the
# data; walking a sorted file in order breaks that. A fresh permutation every epoch keeps batches
# varied, and seeding the generator (`np.random.default_rng(seed)`) makes a run reproducible: the
# same seed gives the same sequence of epochs.
#
# **Why gather a batch at once?** Fetching 64 samples with 64 Python calls and stacking them is
# slow next to one numpy fancy index `array[indices]`. Datasets that hold arrays offer a
# `gather(indices)` method; the loader uses it when present and falls back to `dataset[i]`.
#
# **Language modelling.** A GPT learns to predict token `t+1` from tokens `..t`. From one long
# token array, every window of `seq_len + 1` tokens gives an input `x` (the first `seq_len`) and a
# target `y` (the same window shifted by one). `numpy.lib.stride_tricks.sliding_window_view`
# exposes all windows as a *view*: no token is copied until a batch is gathered.
#
# Batches come out as `Tensor`s (float32). Token ids stay exact: float32 represents every
# integer below 2^24 (16.7 million) exactly. `as_numpy=True` keeps the original integer arrays.

# %%
#| default_exp data.loader

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tinytorch.core.tensor import Tensor

FLOAT32_EXACT = 2**24  # every integer below this is exact in float32


def _check_positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


class Dataset:
    """The dataset protocol: `len(ds)` samples, `ds[i]` fetches sample i."""

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")


def _check_index(index, length: int) -> int:
    if not isinstance(index, (int, np.integer)):
        raise TypeError(f"dataset index must be an integer, got {type(index).__name__}")
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range for a dataset of {length} samples")
    return int(index) % length


# %% [markdown]
# ## `TensorDataset`: samples are rows of arrays
#
# `TensorDataset(features, labels)` holds arrays that share their first axis; sample `i` is the
# tuple of their `i`-th rows. `gather(indices)` returns the tuple of those rows for many indices
# at once, one fancy index per array.


# %% nbgrader={"grade": false, "grade_id": "tensor-dataset", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class TensorDataset(Dataset):
    """Samples are the matching rows of arrays that share their first axis."""

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("TensorDataset needs at least one array, e.g. TensorDataset(x, y)")
        arrays = tuple(np.asarray(a.data if isinstance(a, Tensor) else a) for a in arrays)
        lengths = [a.shape[0] if a.ndim else None for a in arrays]
        if None in lengths or len(set(lengths)) != 1:
            shapes = ", ".join(str(a.shape) for a in arrays)
            raise ValueError(
                f"TensorDataset arrays must share their first axis, got shapes {shapes}; "
                "pass one row per sample in every array"
            )
        self.arrays = arrays

    def __len__(self) -> int:
        ### BEGIN SOLUTION
        return self.arrays[0].shape[0]
        ### END SOLUTION

    def __getitem__(self, index) -> tuple:
        index = _check_index(index, len(self))
        ### BEGIN SOLUTION
        return tuple(a[index] for a in self.arrays)
        ### END SOLUTION

    def gather(self, indices: np.ndarray) -> tuple:
        """The rows at `indices` of every array, one fancy index each."""
        ### BEGIN SOLUTION
        return tuple(a[indices] for a in self.arrays)
        ### END SOLUTION


# %% [markdown]
# ## `DataLoader`: order, batches, stacking
#
# - `len(loader)` is the number of batches: `ceil(n / batch_size)`, or `n // batch_size` with
#   `drop_last=True` (the short final batch is dropped, which keeps every batch the same shape).
# - Iterating draws the order: `arange(n)`, or a new `rng.permutation(n)` each epoch when
#   shuffling. The generator is made once, in `__init__`, so epochs differ but a seed fixes them
#   all.
# - Each batch of indices becomes arrays through `gather` when the dataset has it, otherwise by
#   fetching samples and `np.stack`ing each field (`collate`). Finally arrays become Tensors.


# %% nbgrader={"grade": false, "grade_id": "dataloader", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def collate(samples: list):
    """Stack a list of samples (arrays, or tuples of arrays) field by field."""
    ### BEGIN SOLUTION
    if isinstance(samples[0], tuple):
        return tuple(np.stack(field) for field in zip(*samples))
    return np.stack(samples)
    ### END SOLUTION


def _to_tensor(array: np.ndarray) -> Tensor:
    if array.dtype.kind in "iu" and array.size and np.abs(array).max() >= FLOAT32_EXACT:
        raise ValueError(
            f"integer values up to {np.abs(array).max()} are not exact in a float32 Tensor; "
            "use DataLoader(..., as_numpy=True) to keep integer arrays"
        )
    return Tensor(array)


class DataLoader:
    """Iterate over a dataset in batches, optionally shuffled with a seeded generator."""

    def __init__(
        self,
        dataset,
        batch_size: int = 32,
        shuffle: bool = False,
        seed: int | None = None,
        drop_last: bool = False,
        as_numpy: bool = False,
    ):
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(
                f"DataLoader needs a dataset with __len__ and __getitem__, "
                f"got {type(dataset).__name__}"
            )
        self.dataset = dataset
        self.batch_size = _check_positive("batch_size", batch_size)
        self.shuffle, self.drop_last, self.as_numpy = shuffle, drop_last, as_numpy
        self.rng = np.random.default_rng(seed)  # made once: each epoch draws a new order

    def __len__(self) -> int:
        ### BEGIN SOLUTION
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        ### END SOLUTION

    def _fetch(self, indices: np.ndarray):
        gather = getattr(self.dataset, "gather", None)
        ### BEGIN SOLUTION
        if gather is not None:
            return gather(indices)
        return collate([self.dataset[int(i)] for i in indices])
        ### END SOLUTION

    def _convert(self, batch):
        if self.as_numpy:
            return batch
        if isinstance(batch, tuple):
            return tuple(_to_tensor(a) for a in batch)
        return _to_tensor(batch)

    def __iter__(self):
        n = len(self.dataset)
        ### BEGIN SOLUTION
        order = self.rng.permutation(n) if self.shuffle else np.arange(n)
        for b in range(len(self)):
            indices = order[b * self.batch_size : (b + 1) * self.batch_size]
            yield self._convert(self._fetch(indices))
        ### END SOLUTION


# %% [markdown]
# ## `LanguageModelDataset`: windows over one token array
#
# With `T = seq_len`, window `i` is `tokens[i : i + T + 1]`; `x` is its first `T` tokens and `y`
# its last `T`, so `y[t]` is the token that follows `x[t]`. `sliding_window_view(tokens, T + 1)`
# is a `(len(tokens) - T, T + 1)` view of all windows; `stride` keeps every `stride`-th window
# (`stride=seq_len` gives non-overlapping windows), still a view.
#
# `random_batch(batch_size, rng)` is what a GPT training loop calls each step: pick random
# window indices and gather them in one fancy index, `(B, T + 1)`, then split into `x` and `y`.


# %% nbgrader={"grade": false, "grade_id": "lm-dataset", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class LanguageModelDataset(Dataset):
    """Next-token windows over a 1-D token array: sample i is (x, y), y shifted by one."""

    def __init__(self, tokens, seq_len: int, stride: int = 1):
        tokens = np.asarray(tokens.data if isinstance(tokens, Tensor) else tokens)
        if tokens.ndim != 1:
            raise ValueError(f"tokens must be a 1-D array of ids, got shape {tokens.shape}")
        if tokens.dtype.kind not in "iu":
            if tokens.size and not np.all(tokens == np.round(tokens)):
                raise TypeError("tokens must be integer ids; encode the text with a tokenizer")
            tokens = tokens.astype(np.int64)
        self.seq_len = _check_positive("seq_len", seq_len)
        self.stride = _check_positive("stride", stride)
        if self.seq_len >= len(tokens):
            raise ValueError(
                f"seq_len={seq_len} needs at least {seq_len + 1} tokens, got {len(tokens)}; "
                "use a shorter seq_len or more text"
            )
        self.tokens = tokens
        ### BEGIN SOLUTION
        self.windows = sliding_window_view(tokens, self.seq_len + 1)[:: self.stride]
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION
        return self.windows.shape[0]
        ### END SOLUTION

    def __getitem__(self, index) -> tuple[np.ndarray, np.ndarray]:
        window = self.windows[_check_index(index, len(self))]
        ### BEGIN SOLUTION
        return window[:-1], window[1:]
        ### END SOLUTION

    def gather(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x and y of the windows at `indices`, each (B, T), from one gather."""
        ### BEGIN SOLUTION
        batch = self.windows[indices]  # (B, T + 1), the only copy
        return batch[:, :-1], batch[:, 1:]
        ### END SOLUTION

    def random_batch(self, batch_size: int, rng=None) -> tuple[np.ndarray, np.ndarray]:
        """`batch_size` random windows as integer arrays x, y of shape (B, T)."""
        batch_size = _check_positive("batch_size", batch_size)
        rng = np.random.default_rng(rng)  # a Generator passes through; an int seeds one
        ### BEGIN SOLUTION
        return self.gather(rng.integers(0, len(self), size=batch_size))
        ### END SOLUTION


# %% [markdown]
# ## `DigitsDataset`: real handwritten digits
#
# The repository ships 1,797 handwritten digits in `data/digits.csv.gz` (UCI's optical recognition
# of handwritten digits, 8x8 images; `data/README.md` gives the source and licence). Each row of
# the file is 64 pixel counts from 0 to 16, read row by row, followed by the label 0-9.
#
# `load_digits()` turns the table into images `(N, 1, 8, 8)` scaled to `[0, 1]` (one channel,
# the layout a convolution expects) and integer labels. The split is fixed: 360 rows chosen once
# by a seeded permutation are the test set, the other 1,437 the training set. NumPy's legacy
# `RandomState` is frozen by its compatibility policy, so every machine draws the same rows.
# `DigitsDataset(split)` is a `TensorDataset` over one side of the split; `flatten=True` gives
# rows of 64 pixels for a multi-layer perceptron.

# %% nbgrader={"grade": false, "grade_id": "digits-path", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
DIGITS_TEST_SIZE, DIGITS_SPLIT_SEED = 360, 1998


def digits_path() -> Path:
    """Where the repository keeps the digits: data/digits.csv.gz beside the tinytorch package."""
    import tinytorch

    return Path(tinytorch.__file__).resolve().parents[1] / "data" / "digits.csv.gz"


# %% nbgrader={"grade": false, "grade_id": "digits", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export


def load_digits(path=None) -> tuple[np.ndarray, np.ndarray]:
    """Every digit: images (N, 1, 8, 8) float32 in [0, 1] and labels (N,) int64."""
    path = Path(path) if path is not None else digits_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"no digits file at {path}; it ships with the repository as data/digits.csv.gz "
            "(restore it with git checkout data/digits.csv.gz)"
        )
    with gzip.open(path, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.int64)
    ### BEGIN SOLUTION
    images = (table[:, :64] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    labels = table[:, 64]
    ### END SOLUTION
    return images, labels


def digits_split(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed split of n rows: (train rows, test rows), each sorted."""
    order = np.random.RandomState(DIGITS_SPLIT_SEED).permutation(n)
    return np.sort(order[DIGITS_TEST_SIZE:]), np.sort(order[:DIGITS_TEST_SIZE])


class DigitsDataset(TensorDataset):
    """One side ("train" or "test") of the digits: samples (image, label)."""

    def __init__(self, split: str = "train", flatten: bool = False, path=None):
        if split not in ("train", "test"):
            raise ValueError(f"DigitsDataset split must be 'train' or 'test', got {split!r}")
        images, labels = load_digits(path)
        rows = digits_split(len(labels))[split == "test"]
        ### BEGIN SOLUTION
        images = images[rows].reshape(len(rows), -1) if flatten else images[rows]
        super().__init__(images, labels[rows])
        ### END SOLUTION
        self.split = split


# %% [markdown]
# ## Try it

# %%
ds = LanguageModelDataset(np.arange(20), seq_len=4)
x, y = next(iter(DataLoader(ds, batch_size=3, shuffle=True, seed=0)))
print(len(ds), x.shape, x.data[0], y.data[0])

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs at once on a seeded generator, asserts what
# must hold, and returns the numbers (outputs and gradients) a grader compares with the
# reference's on a seed of its own.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


# %% nbgrader={"grade": true, "grade_id": "test-epoch", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades=("tensor-dataset", "dataloader"))
def test_epoch_covers_every_sample_once(rng):
    ds = TensorDataset(np.arange(10) * 3, np.arange(10))
    for shuffle in (False, True):
        loader = DataLoader(ds, batch_size=4, shuffle=shuffle, seed=1)
        batches = list(loader)
        assert len(batches) == len(loader) == 3
        seen = np.concatenate([labels.data for _, labels in batches])
        assert sorted(seen.tolist()) == list(range(10))
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    n, size = int(rng.integers(7, 30)), int(rng.integers(2, 6))
    features, labels = rng.normal(size=(n, 3)), rng.integers(0, 10, size=n)
    ds = TensorDataset(features, labels)
    batches = list(DataLoader(ds, batch_size=size))
    shuffled = list(DataLoader(ds, batch_size=size, shuffle=True, seed=int(rng.integers(99))))
    order = np.concatenate([x.data for x, _ in shuffled])
    return {
        "x": np.concatenate([x.data for x, _ in batches]),
        "y": np.concatenate([y.data for _, y in batches]),
        "sizes": np.array([len(y.data) for _, y in batches]),
        "shuffled": order[np.lexsort(order.T[::-1])],  # every row once, in any order
        "lengths": np.array([len(DataLoader(ds, size)), len(DataLoader(ds, size, drop_last=True))]),
    }


# %% nbgrader={"grade": true, "grade_id": "test-lm-windows", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="lm-dataset")
def test_lm_windows(rng):
    tokens = np.arange(100, 130)
    ds = LanguageModelDataset(tokens, seq_len=5)
    assert len(ds) == 25
    x, y = ds[3]
    assert x.tolist() == [103, 104, 105, 106, 107] and y.tolist() == [104, 105, 106, 107, 108]
    assert np.shares_memory(x, tokens)
    bx, by = ds.random_batch(8, rng=0)
    assert bx.shape == by.shape == (8, 5)
    np.testing.assert_array_equal(bx[:, 1:], by[:, :-1])
    tokens = rng.permutation(1000)[: int(rng.integers(20, 60))]  # distinct ids
    seq_len, stride = int(rng.integers(2, 8)), int(rng.integers(1, 4))
    ds = LanguageModelDataset(tokens, seq_len=seq_len, stride=stride)
    picks = rng.integers(0, len(ds), size=4)
    bx, by = ds.random_batch(6, rng=int(rng.integers(99)))
    for row_x, row_y in zip(bx, by):  # each row is a window of the text, y shifted by one
        start = int(np.flatnonzero(tokens == row_x[0])[0])
        np.testing.assert_array_equal(row_x, tokens[start : start + seq_len])
        np.testing.assert_array_equal(row_y, tokens[start + 1 : start + seq_len + 1])
    gx, gy = ds.gather(picks)
    return {
        "length": np.array(len(ds)),
        "x": np.stack([ds[int(i)][0] for i in picks]),
        "y": np.stack([ds[int(i)][1] for i in picks]),
        "gx": gx,
        "gy": gy,
        "batch_shape": np.array(bx.shape),
    }


# %% nbgrader={"grade": true, "grade_id": "test-digits", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-7, grades="digits")
def test_digits_from_a_file(rng):
    import tempfile

    n = DIGITS_TEST_SIZE + int(rng.integers(20, 60))
    table = np.concatenate([rng.integers(0, 17, (n, 64)), rng.integers(0, 10, (n, 1))], axis=1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "digits.csv.gz"
        with gzip.open(path, "wt") as handle:
            np.savetxt(handle, table, fmt="%d", delimiter=",")
        images, labels = load_digits(path)
        assert images.shape == (n, 1, 8, 8) and images.dtype == np.float32
        train = DigitsDataset("train", path=path)
        test = DigitsDataset("test", flatten=True, path=path)
    assert len(test) == DIGITS_TEST_SIZE and len(train) == n - DIGITS_TEST_SIZE
    x, y = test[int(rng.integers(len(test)))]
    return {"images": images, "labels": labels, "train_x": train[3][0], "train_y": train[3][1],
            "test_x": x, "test_y": y}  # fmt: skip
