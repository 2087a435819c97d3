"""Dataset, TensorDataset and DataLoader: coverage, order, seeds, drop_last, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.core.tensor import Tensor
from tinytorch.data.loader import DataLoader, Dataset, TensorDataset


class SquaresDataset(Dataset):
    """A dataset without `gather`, so the loader must fetch and stack samples itself."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return np.array([index, index * index]), np.int64(index)


def labels_of(batches):
    parts = [np.asarray(labels.data).reshape(-1) for _, labels in batches]
    return np.concatenate(parts) if parts else np.zeros(0)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    batch_size=st.integers(1, 17),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
)
def test_every_sample_once_per_epoch(n, batch_size, shuffle, drop_last):
    ds = TensorDataset(np.arange(n) * 2.0, np.arange(n))
    loader = DataLoader(ds, batch_size, shuffle=shuffle, seed=3, drop_last=drop_last)
    batches = list(loader)
    full, rest = divmod(n, batch_size)
    expected_len = full if drop_last or rest == 0 else full + 1
    assert len(loader) == len(batches) == expected_len
    assert all(len(labels) == batch_size for _, labels in batches[:full])
    seen = labels_of(batches)
    assert len(np.unique(seen)) == len(seen)  # no sample twice
    if drop_last:
        assert len(seen) == full * batch_size
    else:
        assert sorted(seen.tolist()) == list(range(n))
    for features, labels in batches:  # rows stay paired
        np.testing.assert_array_equal(features.data, labels.data * 2)


def test_unshuffled_order_is_the_dataset_order():
    ds = TensorDataset(np.arange(7))
    batches = [b.data.tolist() for (b,) in DataLoader(ds, batch_size=3)]
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]


def test_same_seed_same_order_new_order_each_epoch():
    ds = TensorDataset(np.arange(50))

    def epochs(loader, count):
        return [labels_of([(None, b) for (b,) in loader]).tolist() for _ in range(count)]

    first = epochs(DataLoader(ds, 8, shuffle=True, seed=42), 3)
    again = epochs(DataLoader(ds, 8, shuffle=True, seed=42), 3)
    other = epochs(DataLoader(ds, 8, shuffle=True, seed=43), 1)
    assert first == again
    assert first[0] != first[1] != first[2]
    assert first[0] != other[0]
    assert first[0] != list(range(50))


def test_batches_are_float32_tensors_or_exact_int_arrays():
    tokens = np.array([[0, 5], [70_000, 16_777_215]])  # largest id float32 holds exactly
    (batch,) = next(iter(DataLoader(TensorDataset(tokens), batch_size=2)))
    assert isinstance(batch, Tensor) and batch.dtype == np.float32
    np.testing.assert_array_equal(batch.data.astype(np.int64), tokens)
    (raw,) = next(iter(DataLoader(TensorDataset(tokens), batch_size=2, as_numpy=True)))
    assert raw.dtype == tokens.dtype
    np.testing.assert_array_equal(raw, tokens)
    big = TensorDataset(np.array([2**24 + 1]))
    with pytest.raises(ValueError, match="as_numpy=True"):
        next(iter(DataLoader(big, batch_size=1)))


def test_dataset_without_gather_is_collated():
    loader = DataLoader(SquaresDataset(5), batch_size=2, shuffle=True, seed=0)
    batches = list(loader)
    assert [f.shape for f, _ in batches] == [(2, 2), (2, 2), (1, 2)]
    for features, labels in batches:
        np.testing.assert_array_equal(features.data[:, 0], labels.data)
        np.testing.assert_array_equal(features.data[:, 1], labels.data**2)
    assert sorted(labels_of(batches).tolist()) == [0, 1, 2, 3, 4]


def test_tensor_dataset_items_and_errors():
    x = np.arange(12).reshape(4, 3)
    ds = TensorDataset(Tensor(x), np.arange(4))
    assert len(ds) == 4
    row, label = ds[-1]
    np.testing.assert_array_equal(row, x[3])
    assert label == 3
    with pytest.raises(IndexError, match="out of range"):
        ds[4]
    with pytest.raises(ValueError, match="first axis"):
        TensorDataset(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="at least one array"):
        TensorDataset()


def test_bad_loader_arguments():
    ds = TensorDataset(np.arange(3))
    assert len(DataLoader(ds, batch_size=5)) == 1
    assert len(DataLoader(ds, batch_size=5, drop_last=True)) == 0
    for bad in (0, -2):
        with pytest.raises(ValueError, match="batch_size must be at least 1"):
            DataLoader(ds, batch_size=bad)
    with pytest.raises(TypeError, match="batch_size"):
        DataLoader(ds, batch_size=2.5)
    with pytest.raises(TypeError, match="__len__ and __getitem__"):
        DataLoader(42)
