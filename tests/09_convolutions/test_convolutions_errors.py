"""Bad shapes and arguments fail in one line that names the problem and the fix."""

import numpy as np
import pytest

from tinytorch.core.spatial import AvgPool2d, BatchNorm2d, Conv2d, Flatten, MaxPool2d
from tinytorch.core.tensor import ShapeError


def one_line(err):
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "make, x, says",
    [
        (lambda: Conv2d(1, 4, 3), np.zeros((8, 8)), "(N, C, H, W), got shape (8, 8)"),
        (lambda: Conv2d(3, 4, 3), np.zeros((2, 1, 8, 8)), "expects 3 input channels"),
        (lambda: Conv2d(1, 4, 5), np.zeros((2, 1, 4, 8)), "larger than the padded input 4x8"),
        (lambda: MaxPool2d(3), np.zeros((1, 1, 2, 2)), "larger than the padded input 2x2"),
        (lambda: AvgPool2d(2), np.zeros((4, 4)), "expects a batch of images"),
        (lambda: BatchNorm2d(3), np.zeros((2, 4, 5, 5)), "(N, 3, H, W), got shape (2, 4, 5, 5)"),
        (lambda: BatchNorm2d(3), np.zeros((1, 3, 1, 1)), "more than one value per channel"),
        (lambda: Flatten(2, 1), np.zeros((2, 3, 4)), "start_dim must come before end_dim"),
    ],
)  # fmt: skip
def test_bad_input_shape_is_a_shape_error(make, x, says):
    with pytest.raises(ShapeError) as err:
        make()(x)
    assert says in one_line(err)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda: Conv2d(0, 4, 3), "in_channels must be a positive integer, got 0"),
        (lambda: Conv2d(1, 4.5, 3), "out_channels must be a positive integer, got 4.5"),
        (lambda: Conv2d(1, 4, (3, 0)), "kernel_size must be an integer >= 1 or a pair"),
        (lambda: Conv2d(1, 4, 3, stride=(1, 2, 3)), "stride must be an integer >= 1 or a pair"),
        (lambda: Conv2d(1, 4, 3, padding=-1), "padding must be an integer >= 0"),
        (lambda: MaxPool2d(2, padding=2), "may be at most half the kernel"),
        (lambda: BatchNorm2d(4, momentum=2.0), "momentum must be in [0, 1]"),
    ],
)
def test_bad_arguments_are_one_line_value_errors(make, says):
    with pytest.raises(ValueError) as err:
        make()
    assert says in one_line(err)
