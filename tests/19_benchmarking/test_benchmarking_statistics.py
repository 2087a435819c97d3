"""Module 19's statistics: timing with warm-up, medians and bootstrap intervals, and a verdict
that finds a planted 10% slowdown and no difference between identical candidates.

The timings here are simulated (lognormal noise, seeded), so the tests check the statistics
without timing anything on a shared machine."""

import numpy as np
import pytest

from tinytorch.bench.harness import (
    Summary,
    bootstrap_medians,
    compare,
    schedule,
    summarize,
    time_calls,
)


def fake_clock(durations):
    """A clock whose successive (start, stop) reads are `durations` apart."""
    now, ticks = 0.0, []
    for d in durations:
        ticks += [now, now + d]
        now += d + 1.0
    return iter(ticks).__next__


def test_warmup_calls_are_made_and_not_timed():
    calls = []
    seconds = time_calls(lambda: calls.append(1), warmup=5, repeats=3, clock=fake_clock([1, 2, 3]))
    assert len(calls) == 8
    np.testing.assert_allclose(seconds, [1, 2, 3])


def test_time_calls_times_real_calls():
    seconds = time_calls(lambda: sum(range(1000)), warmup=1, repeats=5)
    assert seconds.shape == (5,) and (seconds > 0).all()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_repeats_must_be_a_positive_whole_number(bad):
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1"):
        time_calls(lambda: None, repeats=bad)


def test_summary_matches_numpy_and_its_interval_holds_the_median():
    samples = np.random.default_rng(3).lognormal(0, 0.2, 51)
    s = summarize(samples)
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    assert (s.median, s.q1, s.q3, s.n) == (median, q1, q3, 51)
    assert s.low < s.median < s.high and s.spread == pytest.approx(q3 - q1)
    assert summarize(samples) == s  # seeded: the same summary twice


def test_the_interval_narrows_with_more_samples():
    rng = np.random.default_rng(4)
    few, many = summarize(rng.lognormal(0, 0.1, 10)), summarize(rng.lognormal(0, 0.1, 400))
    assert many.high - many.low < (few.high - few.low) / 2


def test_bootstrap_medians_resample_with_replacement():
    samples = np.arange(9.0)
    medians = bootstrap_medians(samples, resamples=500, seed=0)
    assert medians.shape == (500,) and set(medians) <= set(samples)
    assert len(set(medians)) > 3  # resampled, not the sample's median over and over


def test_one_outlier_does_not_move_the_median():
    samples = np.full(21, 1.0)
    samples[0] = 1000.0
    assert summarize(samples).median == 1.0


def test_a_planted_ten_percent_slowdown_is_found_and_identical_candidates_are_not_told_apart():
    found = false_alarms = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        base = rng.lognormal(0, 0.05, 30)
        found += compare(base, 1.1 * rng.lognormal(0, 0.05, 30), seed=seed).verdict == "slower"
        same = compare(base, rng.lognormal(0, 0.05, 30), seed=seed)
        false_alarms += same.verdict != "no difference"
    assert found >= 38 and false_alarms <= 2


def test_compare_reports_the_ratio_of_medians_with_its_interval():
    base = np.random.default_rng(0).lognormal(0, 0.05, 40)
    result = compare(base, 2 * base)
    assert result.ratio == pytest.approx(2.0) and result.low <= 2.0 <= result.high
    assert result.verdict == "slower" and compare(2 * base, base).verdict == "faster"
    assert "2.000x" in str(result)


def test_schedule_alternates():
    assert schedule(["a", "b", "c"], 3) == list("abccbaabc")
    with pytest.raises(ValueError, match="rounds"):
        schedule(["a"], 0)


def test_bad_samples_are_one_clear_error():
    with pytest.raises(ValueError, match="at least one finite sample"):
        summarize([])
    with pytest.raises(ValueError, match="at least one finite sample"):
        summarize([1.0, float("nan")])
    with pytest.raises(ValueError, match="confidence"):
        summarize([1.0], confidence=1.5)


def test_a_summary_is_a_record():
    record = summarize([1.0, 2.0, 3.0]).as_record()
    assert set(record) == {"median", "q1", "q3", "low", "high", "n"}
    assert isinstance(summarize([1.0]), Summary)


def test_the_summary_reports_the_one_quartiles_of_the_timings():
    from tinytorch.bench.quartiles import quartiles

    samples = np.random.default_rng(7).lognormal(0, 0.4, size=37)
    q1, median, q3 = quartiles(samples)
    assert (q1, median, q3) == tuple(np.percentile(samples, [25, 50, 75]))
    s = summarize(samples)
    assert (s.q1, s.median, s.q3) == (q1, median, q3)
    with pytest.raises(ValueError, match="no samples"):
        quartiles([])
