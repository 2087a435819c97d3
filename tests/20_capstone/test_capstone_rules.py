"""Module 20's judge arithmetic: held-out bits per character (against PyTorch's cross-entropy),
the rules an entry must keep, and the scores against the baseline."""

import math

import numpy as np
import oracle
import pytest

from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.olympics.events import EVENTS, Measured, event
from tinytorch.olympics.rules import (
    all_around,
    heldout_bits_per_char,
    improvement,
    score,
    violation,
)


class Table:
    def __init__(self, table):
        self.table = np.asarray(table)
        self.calls = []

    def __call__(self, ids):
        self.calls.append(ids.data.shape)
        return Tensor(self.table[ids.data.astype(np.int64)])


# torch.nn.functional.cross_entropy's summed nats, committed by tests/torch_oracle/m20_capstone.py
REF = oracle.load(__file__)
BASE = Measured(tokens_per_second=400.0, bytes=2_000_000, bits_per_char=2.0)


@pytest.mark.parametrize("window", [1, 3, 7])
def test_bits_per_char_is_torch_cross_entropy_over_the_windows(window):
    case = REF.case(f"table/{window}")  # F.cross_entropy over the windows, reduction="sum"
    ids = case["ids"]
    model = Table(case["table"])
    bits = heldout_bits_per_char(model, ids, chars=123, window=window)
    count = (len(ids) - 1) // window
    assert model.calls == [(count, window)]  # one batch, non-overlapping windows
    assert bits == pytest.approx(case["nats"].item() / math.log(2) / 123, rel=1e-6)  # float32


def test_bits_per_char_is_stable_for_large_logits_and_exact_for_a_uniform_model():
    ids = np.arange(21) % 4
    huge = np.full((4, 4), -1e4)
    huge[np.arange(4), (np.arange(4) + 1) % 4] = 1e4  # certain of the next token, and right
    assert heldout_bits_per_char(Table(huge), ids, chars=40, window=5) == pytest.approx(0.0)
    assert heldout_bits_per_char(Table(np.zeros((4, 4))), ids, 40, 5) == pytest.approx(20 * 2 / 40)


def test_bad_inputs_are_one_line_errors():
    model = Table(np.zeros((3, 3)))
    with pytest.raises(ShapeError, match="no window"):
        heldout_bits_per_char(model, np.arange(3) % 3, chars=10, window=5)
    with pytest.raises(ShapeError, match="1-d array"):
        heldout_bits_per_char(model, np.zeros((2, 2), dtype=int), chars=10, window=1)
    with pytest.raises(ValueError, match="chars must be positive"):
        heldout_bits_per_char(model, np.arange(9) % 3, chars=0, window=2)
    with pytest.raises(ValueError, match="the events are: speed, size, quality, all-around"):
        event("sprint")
    with pytest.raises(ValueError, match="the metrics are"):
        improvement("flops", BASE, BASE)


def test_quality_bounds_follow_each_event_slack():
    just_in = Measured(900.0, 10, 2.0 * 1.02)
    just_out = Measured(900.0, 10, 2.0 * 1.0201)
    assert violation(EVENTS["speed"], just_in, BASE) is None
    said = violation(EVENTS["speed"], just_out, BASE)
    assert said == "bits/char 2.040 is above the bound 2.040 (baseline 2.000 + 2%)"
    assert violation(EVENTS["size"], just_out, BASE) is None  # 5% there
    assert violation(EVENTS["quality"], Measured(1, 1, 9.0), BASE) is None  # no quality bound


def test_the_quality_event_bounds_training_time_measured_by_the_tool():
    fast = Measured(1.0, 1, 1.5, train_cpu_seconds=59.0)
    slow = Measured(1.0, 1, 1.5, train_cpu_seconds=61.0)
    assert violation(EVENTS["quality"], fast, BASE, budget=60) is None
    assert "over the budget of 60" in violation(EVENTS["quality"], slow, BASE, budget=60)
    assert violation(EVENTS["speed"], slow, BASE, budget=60) is None  # only quality trains


@pytest.mark.parametrize(
    "broken",
    [
        Measured(0.0, 10, 2.0),
        Measured(10.0, 0, 2.0),
        Measured(math.nan, 10, 2.0),
        Measured(10.0, 10, math.inf),
    ],
)
def test_an_entry_that_did_not_run_breaks_every_event(broken):
    for e in EVENTS.values():
        assert violation(e, broken, BASE) is not None
        assert score(e, broken, BASE) == 0.0


def test_scores_are_improvements_over_the_baseline():
    twice_as_fast = Measured(800.0, 2_000_000, 2.0)
    half_size = Measured(400.0, 1_000_000, 2.0)
    better = Measured(400.0, 2_000_000, 1.6)
    assert score(EVENTS["speed"], twice_as_fast, BASE) == pytest.approx(2.0)
    assert score(EVENTS["size"], half_size, BASE) == pytest.approx(2.0)
    assert score(EVENTS["quality"], better, BASE) == pytest.approx(1.25)
    both = Measured(800.0, 1_000_000, 2.0)
    assert all_around(both, BASE) == pytest.approx(4 ** (1 / 3))
    assert score(EVENTS["all-around"], both, BASE) == pytest.approx(4 ** (1 / 3))
    assert score(EVENTS["all-around"], BASE, BASE) == pytest.approx(1.0)


def test_a_fast_model_that_lost_its_quality_scores_nothing():
    fast_but_wrong = Measured(4000.0, 100, 2.5)
    assert score(EVENTS["speed"], fast_but_wrong, BASE) == 0.0
    assert score(EVENTS["size"], fast_but_wrong, BASE) == 0.0
    assert score(EVENTS["all-around"], fast_but_wrong, BASE) == 0.0
    assert score(EVENTS["quality"], fast_but_wrong, BASE) == pytest.approx(0.8)  # honest: worse
