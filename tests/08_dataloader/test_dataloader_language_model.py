"""LanguageModelDataset: next-token windows as views, random batches, loader integration."""

import numpy as np
import pytest

from tinytorch.data.loader import DataLoader, LanguageModelDataset


def test_windows_are_views_and_y_is_x_shifted():
    tokens = np.random.default_rng(0).integers(0, 65, size=200)
    ds = LanguageModelDataset(tokens, seq_len=16)
    assert len(ds) == 200 - 16
    for i in (0, 7, len(ds) - 1, -1):
        x, y = ds[i]
        start = i % len(ds)
        assert x.shape == y.shape == (16,)
        assert np.shares_memory(x, tokens) and np.shares_memory(y, tokens)
        np.testing.assert_array_equal(x, tokens[start : start + 16])
        np.testing.assert_array_equal(y, tokens[start + 1 : start + 17])
    assert np.shares_memory(ds.windows, tokens)
    with pytest.raises(IndexError, match="out of range"):
        ds[len(ds)]


def test_stride_gives_non_overlapping_views():
    tokens = np.arange(41)
    ds = LanguageModelDataset(tokens, seq_len=10, stride=10)
    assert len(ds) == 4
    xs = [ds[i][0].tolist() for i in range(4)]
    assert xs == [list(range(s, s + 10)) for s in (0, 10, 20, 30)]
    assert np.shares_memory(ds[2][1], tokens)


def test_random_batch_is_one_gather_of_valid_windows():
    tokens = np.arange(1000) * 7
    ds = LanguageModelDataset(tokens, seq_len=32)
    x, y = ds.random_batch(64, np.random.default_rng(1))
    assert x.shape == y.shape == (64, 32) and x.dtype.kind == "i"
    starts = x[:, 0] // 7
    np.testing.assert_array_equal(x, (starts[:, None] + np.arange(32)) * 7)
    np.testing.assert_array_equal(y, x + 7)
    again, _ = ds.random_batch(64, np.random.default_rng(1))
    np.testing.assert_array_equal(x, again)
    assert len(np.unique(starts)) > 1


@pytest.mark.parametrize("stride", [2, 4, 7])
def test_random_batch_draws_window_indices_with_a_stride(stride):
    """random_batch picks among the dataset's windows (every `stride`-th start), not among
    token positions: each row is one of those windows, and every window can be drawn."""
    tokens = np.arange(50)
    ds = LanguageModelDataset(tokens, seq_len=4, stride=stride)
    x, y = ds.random_batch(400, rng=0)
    starts = x[:, 0]
    assert set(starts.tolist()) == {int(ds[i][0][0]) for i in range(len(ds))}
    np.testing.assert_array_equal(x, starts[:, None] + np.arange(4))
    np.testing.assert_array_equal(y, x + 1)


def test_loader_over_windows_covers_each_window_once():
    tokens = np.arange(30)
    ds = LanguageModelDataset(tokens, seq_len=4)
    batches = list(DataLoader(ds, batch_size=8, shuffle=True, seed=5, as_numpy=True))
    starts = np.concatenate([x[:, 0] for x, _ in batches])
    assert sorted(starts.tolist()) == list(range(len(ds)))
    for x, y in batches:
        np.testing.assert_array_equal(y, x + 1)


def test_bad_lengths_give_clear_errors():
    tokens = np.arange(10)
    assert len(LanguageModelDataset(tokens, seq_len=9)) == 1  # the longest allowed window
    for seq_len in (10, 50):
        with pytest.raises(ValueError, match="at least"):
            LanguageModelDataset(tokens, seq_len=seq_len)
    with pytest.raises(ValueError, match="seq_len must be at least 1"):
        LanguageModelDataset(tokens, seq_len=0)
    with pytest.raises(ValueError, match="1-D"):
        LanguageModelDataset(tokens.reshape(2, 5), seq_len=2)
    with pytest.raises(TypeError, match="integer ids"):
        LanguageModelDataset(np.linspace(0, 1, 10), seq_len=2)
    ds = LanguageModelDataset(tokens, seq_len=3)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="batch_size must be at least 1"):
            ds.random_batch(bad, rng=0)
