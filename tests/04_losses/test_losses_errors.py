"""Bad input gives one clear error naming shapes or values."""

import re

import numpy as np
import pytest

from tinytorch.core.losses import CrossEntropyLoss, cross_entropy, mse_loss
from tinytorch.core.tensor import ShapeError, Tensor

LOGITS = np.zeros((2, 3, 5), dtype=np.float32)


def test_targets_out_of_range_name_the_value_and_class_count():
    targets = np.array([[0, 1, 5], [0, 0, 0]])
    with pytest.raises(ValueError, match=r"target 5 is out of range for 5 classes.*\[0, 4\]"):
        cross_entropy(LOGITS, targets)
    with pytest.raises(ValueError, match=r"target -3 is out of range"):
        cross_entropy(LOGITS, np.array([[0, -3, 1], [0, 0, 0]]))


def test_out_of_range_message_mentions_ignore_index():
    targets = np.array([[0, 1, -1], [0, 9, 0]])
    with pytest.raises(ValueError, match=r"target 9 .* ignore_index=-1"):
        cross_entropy(LOGITS, targets, ignore_index=-1)
    with pytest.raises(ValueError, match=r"target -1"):  # -1 counts when it is not ignored
        CrossEntropyLoss(ignore_index=-100)(LOGITS, np.array([[0, 1, -1], [0, 0, 0]]))


def test_non_integer_targets_are_rejected():
    with pytest.raises(TypeError, match=r"whole class indices, found 1\.5"):
        cross_entropy(LOGITS, np.array([[0, 1.5, 2], [0, 0, 0]]))
    with pytest.raises(TypeError, match="whole class indices, found nan"):
        cross_entropy(LOGITS, np.array([[0, np.nan, 2], [0, 0, 0]]))
    with pytest.raises(TypeError, match="integer class indices, got dtype bool"):
        cross_entropy(LOGITS, np.ones((2, 3), dtype=bool))


def test_whole_number_float_targets_are_accepted():
    loss = cross_entropy(LOGITS, Tensor(np.array([[0, 1, 4], [2, 3, 0]])))
    np.testing.assert_allclose(loss.item(), np.log(5), rtol=1e-6)


@pytest.mark.parametrize("shape", [(2,), (3, 2), (2, 3, 1), (6,)])
def test_target_shape_mismatch_names_both_shapes(shape):
    targets = np.zeros(shape, dtype=np.int64)
    pattern = (
        re.escape("logits (2, 3, 5) need targets of shape (2, 3)") + ".*" + re.escape(str(shape))
    )
    with pytest.raises(ShapeError, match=pattern):
        cross_entropy(LOGITS, targets)


def test_scalar_logits_are_rejected():
    with pytest.raises(ShapeError, match="class axis"):
        cross_entropy(np.float32(1.0), np.int64(0))


def test_mse_shape_mismatch_names_both_shapes():
    with pytest.raises(ShapeError, match=r"\(4, 1\) differs from target shape \(4,\)"):
        mse_loss(np.zeros((4, 1)), np.zeros(4))
