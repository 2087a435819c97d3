"""Local backward rules of the losses against central differences (float64)."""

import numpy as np
from fdcheck import check_function
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.core.losses import CrossEntropyFunction, MSEFunction

lead_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=15, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), seed=st.integers(0, 99)
)
def test_mse_backward_both_inputs(shape, seed):
    rng = np.random.default_rng(seed)
    check_function(MSEFunction, rng.standard_normal(shape), rng.standard_normal(shape))


@settings(max_examples=15, deadline=None)
@given(lead=lead_shapes, classes=st.integers(1, 6), seed=st.integers(0, 99))
def test_cross_entropy_backward_any_leading_shape(lead, classes, seed):
    rng = np.random.default_rng(seed)
    logits = 3 * rng.standard_normal((*lead, classes))
    targets = rng.integers(0, classes, size=lead)
    check_function(CrossEntropyFunction, logits, kwargs={"targets": targets})


@settings(max_examples=15, deadline=None)
@given(
    lead=lead_shapes.filter(lambda s: s != ()), classes=st.integers(2, 5), seed=st.integers(0, 99)
)
def test_cross_entropy_backward_with_ignored_rows(lead, classes, seed):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((*lead, classes))
    targets = rng.integers(0, classes, size=lead)
    targets[rng.random(lead) < 0.4] = -1
    check_function(CrossEntropyFunction, logits, kwargs={"targets": targets, "ignore_index": -1})


def test_cross_entropy_backward_with_large_logits():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((4, 5)) + np.array([0, 0, 50, 0, 0])  # near-saturated rows
    check_function(CrossEntropyFunction, logits, kwargs={"targets": np.array([2, 0, 2, 4])})
