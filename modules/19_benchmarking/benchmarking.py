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
# # Module 19 — Benchmarking
#
# Modules 14 to 18 made the GPT faster and smaller. Each claim of the kind "this is 12% faster"
# rests on a measurement, and measurements on a shared CPU lie in predictable ways:
#
# - **The first calls are slow.** Caches are cold, numpy allocates its buffers, the BLAS library
#   starts its threads. Run a few **warm-up** calls and throw their times away.
# - **One time is noise.** Other programs, the frequency governor and the memory allocator make
#   every repeat different, with a long tail of slow outliers. Take many **repeats** and report
#   the **median** (one slow outlier does not move it) with a **spread**, the interquartile range
#   `q3 - q1`, rather than the mean and the minimum.
# - **A difference needs an interval.** Two medians always differ a little. Whether candidate B is
#   really slower than A is a question about the ratio `median(B) / median(A)`: resample each
#   candidate's times with replacement many times (the **bootstrap**), take the ratio of the
#   resampled medians each time, and keep the middle 95% of those ratios. If the whole interval
#   lies above 1 (by more than a small margin), B is slower; if it contains 1, the measurement
#   cannot tell them apart, and saying "no difference" is the honest answer.
# - **Candidates must not share a process, or a time slot.** Two libraries in one process share
#   BLAS thread pools and the allocator; whichever runs second inherits a warm (or fragmented)
#   heap. Run each candidate in a **process of its own**, and **alternate the order** (A B, then
#   B A) so a machine that slowly gets busier does not always penalise the same one.
# - **Write down the conditions.** The load average, the number of cores, which BLAS ran and with
#   how many threads: a result without them cannot be compared with anything.
#
# The project's own `benchmarks/` (tinytorch against PyTorch) runs on what you write here.

# %%
#| default_exp bench.harness

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tinytorch.bench.quartiles import quartiles


def _whole(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


# %% [markdown]
# ## 1. Timing a call: warm-up, then repeats
#
# `time_calls(fn, warmup, repeats)` calls `fn()` `warmup` times without looking, then `repeats`
# times, reading `clock()` just before and just after each call, and returns the `repeats`
# durations in seconds as an array. The clock is a parameter so that a test can hand it a fake
# one (the default, `time.perf_counter`, is the finest clock Python has).


# %% nbgrader={"grade": false, "grade_id": "time-calls", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def time_calls(fn, warmup: int = 3, repeats: int = 20, clock=time.perf_counter) -> np.ndarray:
    """Seconds of each of `repeats` calls of `fn()`, after `warmup` calls that are not timed."""
    warmup, repeats = _whole("warmup", warmup, 0), _whole("repeats", repeats, 1)
    ### BEGIN SOLUTION
    for _ in range(warmup):
        fn()
    seconds = np.empty(repeats)
    for i in range(repeats):
        start = clock()
        fn()
        seconds[i] = clock() - start
    return seconds
    ### END SOLUTION


# %% [markdown]
# ## 2. Summarising: median, spread and a bootstrap interval
#
# `summarize(samples, seed)` returns a `Summary`: the median, the quartiles `q1` and `q3` (the
# given `quartiles(samples)` in `tinytorch/bench/quartiles.py` returns `(q1, median, q3)`, numpy's
# percentiles 25, 50 and 75; module 14's `latency` reports the same three numbers), and a
# 95% bootstrap confidence interval of the median: draw `resamples` resamples of the same size
# with replacement (`rng.integers(0, n, size=(resamples, n))` picks them all at once), take the
# median of each, and keep the 2.5th and 97.5th percentiles of those medians (for a `confidence`
# c, the percentiles `(1 - c) / 2 * 100` and `100` minus that, with `np.percentile`). The generator
# is `np.random.default_rng(seed)`, so a summary is reproducible: `bootstrap_medians` makes it and
# draws the picks, and `summarize` calls `bootstrap_medians(samples, resamples, seed)`.


# %% nbgrader={"grade": false, "grade_id": "summary-type", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
@dataclass(frozen=True)
class Summary:
    median: float
    q1: float
    q3: float
    low: float  # the confidence interval of the median
    high: float
    n: int

    @property
    def spread(self) -> float:
        """The interquartile range, q3 - q1."""
        return self.q3 - self.q1

    def as_record(self) -> dict:
        return {k: getattr(self, k) for k in ("median", "q1", "q3", "low", "high", "n")}


def _samples(samples) -> np.ndarray:
    a = np.asarray(samples, dtype=float).reshape(-1)
    if a.size == 0 or not np.isfinite(a).all():
        raise ValueError(f"need at least one finite sample, got {a.size} values")
    return a


# %% nbgrader={"grade": false, "grade_id": "summarize", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def bootstrap_medians(samples, resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """The medians of `resamples` resamples (with replacement) of `samples`."""
    a = _samples(samples)
    resamples = _whole("resamples", resamples, 1)
    ### BEGIN SOLUTION
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, a.size, size=(resamples, a.size))
    return np.median(a[picks], axis=1)
    ### END SOLUTION


def summarize(samples, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Summary:
    """Median, quartiles and a bootstrap confidence interval of the median."""
    a = _samples(samples)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    ### BEGIN SOLUTION
    q1, median, q3 = quartiles(a)
    medians = bootstrap_medians(a, resamples, seed)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return Summary(float(median), float(q1), float(q3), float(low), float(high), int(a.size))
    ### END SOLUTION


# %% [markdown]
# ## 3. Comparing two candidates
#
# `compare(base, other)` answers "how much slower (or faster) is `other` than `base`?" as the
# ratio of medians `median(other) / median(base)` (`np.median` of the samples themselves) with a
# bootstrap interval: the medians `bootstrap_medians(other, resamples, seed)` divided by
# `bootstrap_medians(base, resamples, seed + 1)` (two seeds, so the two resamplings are
# independent; one generator drawing both is as right: the check compares your interval with a
# bootstrap of its own, within 7% of the interval's width), and of those ratios the middle
# `confidence` share, cut as in `summarize`. The verdict is
# `"slower"` when the whole interval is above `1 + margin`, `"faster"` when it is below
# `1 - margin`, and `"no difference"` otherwise. The margin (2% by default) is the smallest
# difference worth reporting: a real 0.5% change is not a result on a shared machine.


# %% nbgrader={"grade": false, "grade_id": "comparison-type", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
@dataclass(frozen=True)
class Comparison:
    ratio: float  # median(other) / median(base): above 1 means other takes longer
    low: float
    high: float
    verdict: str  # "slower", "faster" or "no difference"

    def __str__(self) -> str:
        return f"{self.ratio:.3f}x [{self.low:.3f}, {self.high:.3f}]: {self.verdict}"


# %% nbgrader={"grade": false, "grade_id": "compare", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def compare(base, other, margin: float = 0.02, confidence: float = 0.95, resamples: int = 2000,
            seed: int = 0) -> Comparison:  # fmt: skip
    """How `other`'s times compare with `base`'s: ratio of medians, interval, verdict."""
    a, b = _samples(base), _samples(other)
    ### BEGIN SOLUTION
    ratios = bootstrap_medians(b, resamples, seed) / bootstrap_medians(a, resamples, seed + 1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    if low > 1 + margin:
        verdict = "slower"
    elif high < 1 - margin:
        verdict = "faster"
    else:
        verdict = "no difference"
    ratio = float(np.median(b) / np.median(a))
    return Comparison(ratio, float(low), float(high), verdict)
    ### END SOLUTION


# %% [markdown]
# ## 4. Order: alternate, so drift does not pick a winner
#
# `schedule(names, rounds)` is the order in which candidates run: every round runs each of them
# once, in the given order on even rounds and reversed on odd ones (`A B C`, `C B A`, `A B C`...).
# A machine that gets slowly busier then costs every candidate the same.


# %% nbgrader={"grade": false, "grade_id": "schedule", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def schedule(names: list, rounds: int) -> list:
    """Every name (any value) once per round, reversed on every other round."""
    names, rounds = list(names), _whole("rounds", rounds, 1)
    ### BEGIN SOLUTION
    order = []
    for r in range(rounds):
        order += names if r % 2 == 0 else names[::-1]
    return order
    ### END SOLUTION


# %% [markdown]
# ## 5. A process per candidate, and the conditions (given)
#
# The given file `tinytorch/bench/processes.py` puts your four functions to work; read it once
# they pass. A candidate is named by `"package.module:function"` plus keyword arguments: the
# function builds what to time and returns a zero-argument callable (so building a model is not
# timed). `run_isolated` starts a fresh Python for it, which times the callable with your
# `time_calls` and prints one JSON line: its times, its process id and `environment()`, the
# conditions it ran under (load, cores, thread variables, numpy's BLAS and its threads).
# `benchmark` runs every candidate once per name in your `schedule`, a process each, then
# `summarize`s each candidate's times and `compare`s every candidate with the first. `tito olympics` measures
# tokens per second through it.


# %% [markdown]
# ## Try it
#
# A planted slowdown: the same work, and the same work plus 10%. The harness should call the
# second slower and two copies of the first the same.

# %%
demo_rng = np.random.default_rng(0)
fast = 1e-3 * demo_rng.lognormal(0, 0.05, 40)
slow = 1.1e-3 * demo_rng.lognormal(0, 0.05, 40)
again = 1e-3 * demo_rng.lognormal(0, 0.05, 40)
print(summarize(fast))
print("slowed:", compare(fast, slow))
print("same:  ", compare(fast, again))

# %% [markdown]
# ## Tests
#
# Each graded cell is a probe: it runs your code on random inputs and returns the numbers, which
# the grader compares with the reference's on inputs of its own choosing.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


# %% nbgrader={"grade": true, "grade_id": "test-time-calls", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="time-calls")
def test_time_calls(rng):
    durations = iter(rng.uniform(0.5, 2.0, size=12))
    now, calls = [0.0], []

    def call():  # each call takes its own time on the fake clock
        calls.append(1)
        now[0] += next(durations)

    def clock():  # and reading the clock a little
        now[0] += 1e-3
        return now[0]

    seconds = time_calls(call, warmup=4, repeats=8, clock=clock)
    assert len(calls) == 12 and seconds.shape == (8,)
    return {"seconds": seconds}


# %% nbgrader={"grade": true, "grade_id": "test-summarize", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="summarize")
def test_summarize(rng):
    samples = rng.lognormal(0, 0.3, size=int(rng.integers(20, 60)))
    seed = int(rng.integers(1000))
    s = summarize(samples, seed=seed)
    assert s.low <= s.median <= s.high and s.q1 <= s.median <= s.q3
    assert np.isclose(s.median, np.median(samples)) and s.n == samples.size
    # the middle half too: bootstrap medians repeat, so two cuts near 95% can fall on one value
    half = summarize(samples, confidence=0.5, seed=seed)
    medians = bootstrap_medians(samples, resamples=300, seed=1)
    return {"summary": [s.median, s.q1, s.q3, s.low, s.high], "half": [half.low, half.high],
            "medians": medians}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-compare", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="compare")
def test_compare(rng):
    base = rng.lognormal(0, 0.05, 40)
    slowed = 1.1 * rng.lognormal(0, 0.05, 40)
    same = rng.lognormal(0, 0.05, 40)
    cases = {"up": (base, slowed, "slower"), "flat": (base, same, "no difference"),
             "down": (slowed, base, "faster")}  # fmt: skip
    own = np.random.default_rng(7)  # this check's own resampling, independent of yours
    found = {}
    for name, (a, b, verdict) in cases.items():
        got = compare(a, b, resamples=20_000, seed=int(rng.integers(1000)))
        assert got.verdict == verdict, (name, got.verdict)
        # a bootstrap interval is an estimate: any independent resampling of 20,000 lands within
        # 7% of the interval's width of this check's own 40,000 (measured: at most 2.4%)
        picks = [own.integers(0, len(x), size=(40_000, len(x))) for x in (b, a)]
        ratios = np.median(b[picks[0]], axis=1) / np.median(a[picks[1]], axis=1)
        low, high = np.percentile(ratios, [2.5, 97.5])
        slack = 0.07 * (high - low)
        assert abs(got.low - low) < slack and abs(got.high - high) < slack, (name, got)
        found[name] = [got.ratio]  # the ratio of medians is exact: no resampling in it
    return found


# %% nbgrader={"grade": true, "grade_id": "test-schedule", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(grades="schedule")
def test_schedule(rng):
    count = int(rng.integers(2, 6))
    rounds = int(rng.integers(2, 5))
    order = schedule([str(i) for i in range(count)], rounds)
    assert len(order) == count * rounds and order[count] == str(count - 1)
    return {"order": np.array([int(x) for x in order])}
