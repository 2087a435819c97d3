"""The shipped handwritten digits: the file, the fixed split and the dataset over it."""

import gzip
import hashlib

import numpy as np
import pytest

from tinytorch.data.loader import (
    DataLoader,
    DigitsDataset,
    digits_path,
    digits_split,
    load_digits,
)

# The file as copied from scikit-learn's bundle (data/README.md); a changed file changes results.
DIGITS_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"


def test_the_file_is_the_documented_one():
    assert hashlib.sha256(digits_path().read_bytes()).hexdigest() == DIGITS_SHA256


def test_images_and_labels():
    images, labels = load_digits()
    assert images.shape == (1797, 1, 8, 8) and images.dtype == np.float32
    assert labels.shape == (1797,) and labels.dtype.kind == "i"
    assert images.min() == 0.0 and images.max() == 1.0
    assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    with gzip.open(digits_path(), "rt") as handle:
        first = [int(v) for v in handle.readline().split(",")]
    np.testing.assert_allclose(images[0].ravel(), np.array(first[:64]) / 16.0, rtol=1e-6)
    assert labels[0] == first[64]


def test_split_is_fixed_disjoint_and_covers_every_row():
    train, test = digits_split(1797)
    assert len(train) == 1437 and len(test) == 360
    assert not set(train) & set(test) and len(set(train) | set(test)) == 1797
    again = digits_split(1797)
    assert np.array_equal(again[0], train) and np.array_equal(again[1], test)
    _, labels = load_digits()
    assert np.bincount(labels[test], minlength=10).min() >= 25  # every class is tested


def test_dataset_sides_and_loader():
    train, test = DigitsDataset("train"), DigitsDataset("test", flatten=True)
    assert len(train) == 1437 and len(test) == 360
    image, label = train[0]
    assert image.shape == (1, 8, 8) and 0 <= label <= 9
    x, y = next(iter(DataLoader(test, batch_size=32)))
    assert x.shape == (32, 64) and y.shape == (32,)
    rows = digits_split(1797)[1]
    images, labels = load_digits()
    np.testing.assert_array_equal(test.arrays[0], images[rows].reshape(360, 64))
    np.testing.assert_array_equal(test.arrays[1], labels[rows])


def test_bad_split_and_missing_file_say_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="'train' or 'test'"):
        DigitsDataset("validation")
    with pytest.raises(FileNotFoundError, match="git checkout data/digits.csv.gz"):
        load_digits(tmp_path / "absent.csv.gz")
