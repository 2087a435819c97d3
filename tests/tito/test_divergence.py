"""tito/student/divergence.py names the shape of an error: each slip below, planted in a real
value."""

import numpy as np
import pytest

from tito.student.divergence import compare

rng = np.random.default_rng(7)
X = rng.normal(size=(3, 5, 8))


def hint(yours, expected=X, about=""):
    found = compare(yours, expected, about=about)
    assert found is not None
    return found.hint


def test_equal_values_are_no_difference():
    assert compare(X + 1e-9, X) is None
    assert compare(np.float32(2.5), np.float64(2.5)) is None


def test_the_summary_gives_the_size_and_place_of_the_error():
    wrong = X.copy()
    wrong[1, 2, 3] += 10
    found = compare(wrong, X)
    assert "at [1, 2, 3]" in found.summary and "max abs error 10" in found.summary
    assert "1% of 120 values off" in found.summary


@pytest.mark.parametrize(
    "yours, words",
    [
        (np.swapaxes(X, -1, -2), "transpose"),
        (X[..., None], "keepdims"),
        (X.reshape(3, 8, 5) * 0 + 1, "transpose"),
        (X.reshape(6, 20), "reshape"),
        (X[:, :1, :], "broadcast"),
    ],
)
def test_shape_slips(yours, words):
    assert words in hint(yours)


def test_a_kept_reduction_over_the_wrong_axis_names_both_axes():
    expected = X.mean(axis=-1, keepdims=True)  # (3, 5, 1)
    found = compare(X.mean(axis=0, keepdims=True), expected)  # (1, 5, 8)
    assert "reduced over axis 0 where the expected is reduced over axis 2" in found.hint
    assert "(axis=-1 belongs)" in found.hint


def test_blocked_scores_on_both_sides_warn_nothing():
    import warnings

    expected = np.array([[0.5, -np.inf], [1.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = compare(expected * np.array([[2.0, 1.0], [1.0, 1.0]]), expected)
    assert found is not None and "at [0, 0]" in found.summary


def test_a_square_transpose():
    square = rng.normal(size=(2, 6, 6))
    assert "transposed" in hint(np.swapaxes(square, -1, -2), square)


def test_a_sign():
    assert "sign" in hint(-X)


SCORES = "Div (in layer MultiHeadAttention) attention.ipynb, cell 7, line 23: scores = q @ k"


def test_a_missing_inverse_square_root_names_d_for_attention_scores():
    text = hint(X * np.sqrt(8), about=SCORES)
    assert "1/sqrt(d)" in text and "d = 8" in text
    assert "d = 64" in hint(X * 8, about=SCORES) and "d = 16" in hint(X / 4.0, about=SCORES)


def test_a_guess_is_kept_to_the_operations_it_fits():
    # a factor of sqrt(254) in loading data is no attention scale; a small error in a
    # training step is no epsilon (neither is in its formula)
    data = "the value 'images' the check reads test-digits"
    assert "sqrt" not in hint(X * np.sqrt(254), about=data)
    assert "sqrt" not in hint(X * 8, about=data) and "8 times larger" in hint(X * 8, about=data)
    close = X * (1 + 0.01 * rng.uniform(size=X.shape))
    step = "LinearFunction (in layer Linear) training.ipynb, cell 9: loss = loss_fn(model(x), y)"
    assert "epsilon" not in hint(close, about=step) and "slightly different" in hint(close)
    wrong = X.copy()
    wrong[0, 0, 0] = np.inf
    assert "epsilon" not in hint(wrong, about=step) and "inf or nan" in hint(wrong, about=step)


def test_a_sum_where_a_mean_belongs_names_the_count():
    assert "8 times larger" in hint(X * 8) and "a sum where a mean belongs" in hint(X * 8)


def test_a_reduction_over_the_wrong_axis():
    right = X - X.mean(axis=-1, keepdims=True)
    wrong = X - X.mean(axis=0, keepdims=True)
    assert "wrong axis" in hint(wrong, right)


def test_a_softmax_over_the_wrong_axis_names_both_axes():
    def softmax(a, axis):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    text = hint(softmax(X, 1), softmax(X, -1))
    assert "softmax" in text and "along axis 1" in text and "along axis 2" in text
    square = rng.normal(size=(2, 6, 6))  # a (T, T) score matrix: not mistaken for a transpose
    assert "softmax" in hint(softmax(square, 1), softmax(square, 2))


def test_a_missing_epsilon():
    var = X.var(axis=-1, keepdims=True) * 1e-3
    right, wrong = X / np.sqrt(var + 1e-5), X / np.sqrt(var)
    assert "epsilon" in hint(wrong, right, about="Div (in layer LayerNorm)")


def test_not_finite():
    wrong = X.copy()
    wrong[0, 0, 0] = np.inf
    assert "epsilon" in hint(wrong, about="Div (in layer BatchNorm2d)")
    assert "inf or nan" in hint(wrong)


def test_zeros():
    assert "all zeros" in hint(np.zeros_like(X))


def test_no_pattern():
    assert "no simple pattern" in hint(rng.normal(size=X.shape))
