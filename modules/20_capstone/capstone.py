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
# # Module 20 — Capstone: the Torch Olympics
#
# You have a GPT you trained yourself, and modules 14 to 19 gave you ways to make it faster
# (caching, acceleration), smaller (quantization, pruning, low-rank factors, distillation) and to
# measure either honestly (profiling, benchmarking). The capstone is a contest with rules:
#
# | event | what is ranked | the rule that must hold |
# |---|---|---|
# | `speed` | tokens per second of cached generation | held-out bits/char at most 2% above the baseline's |
# | `size` | bytes of the model's weights | held-out bits/char at most 5% above the baseline's |
# | `quality` | held-out bits/char | trained by the tool within a budget of CPU-seconds |
# | `all-around` | the geometric mean of the three improvements | bits/char at most 5% above the baseline's |
#
# Two things make a contest like this fair, and both are the tool's job, not yours:
#
# - **Nothing self-reported counts.** A submission is a trained run plus a small manifest that
#   names the transformations to apply (for example `["quantize:int8-per-channel", "accelerate"]`).
#   `tito olympics run EVENT` loads the run, applies them with the package's own code, and
#   measures everything itself. A number written in the manifest is ignored.
# - **Quality is measured on text the model never saw.** The held-out text is documentation from
#   standard-library modules that the default training corpus leaves out. A model that memorised its
#   training text gains nothing there, and one trained on the held-out text itself is caught: the
#   tool scores that text again with its sentences in a fresh random order, and an entry that
#   loses more than 0.04 bits/char to the new order learned it in order, a violation that scores 0.
#
# Your part is the judge's arithmetic: how quality is measured (bits per character on held-out
# text), whether an entry keeps the rules, and how it is scored against the baseline, which is the
# same run measured without any transformation.

# %%
#| default_exp olympics.rules

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
from __future__ import annotations

import math

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.olympics.events import EVENTS, HIGHER_IS_BETTER, Contest, Measured, event  # noqa: F401

# %% [markdown]
# ## The contest's rules, as data (given)
#
# The given file `tinytorch/olympics/events.py` holds the rules you judge by; read it once.
# `EVENTS` maps each event's name to a `Contest` with these fields:
#
# - `metric`: what ranks, `"tokens_per_second"`, `"bytes"`, `"bits_per_char"`, or `"score"`
#   (the all-around geometric mean);
# - `quality_slack`: how far bits/char may rise above the baseline's, as a fraction (0.02 for 2%),
#   or `None` for an event without that bound (`quality`);
# - `trained_within_budget`: True for `quality` only, whose model the tool trains itself.
#
# A `Measured` is what the tool measured of one entry: `tokens_per_second`, `bytes`,
# `bits_per_char` and `train_cpu_seconds`; `measured.metric(name)` reads one of the first three by
# name. `HIGHER_IS_BETTER` says which way is better for each of those three, and `event(name)`
# looks an event up with a clear error.


# %% [markdown]
# ## 1. Bits per character on held-out text
#
# A language model's loss is the mean of `-ln p(next token)` in nats per token. Two models with
# different tokenizers cannot be compared that way (a BPE token spells several characters), so the
# contest uses **bits per character**: the total surprise of the held-out text in bits, divided by
# the number of characters it spells,
#
#     bits/char = (sum over predicted tokens of -ln p(token)) / ln 2 / characters.
#
# `heldout_bits_per_char(model, ids, chars, window)` cuts the token ids into non-overlapping
# windows of `window + 1` tokens (inputs are the first `window`, targets the last `window`; a
# shorter tail is dropped), runs the model on all windows at once as a batch `(N, window)` without
# recording a graph (`no_grad`), and adds up `-ln softmax(logits)[target]`: that is module 04's
# `cross_entropy(logits, targets)` (the mean over every target, in nats) times the number of
# targets; the course computes cross-entropy in that one place. `chars` is the number of
# characters the predicted (target) tokens spell; the caller counts them, since only it knows the
# tokenizer.
#
# A model here is anything called as `model(Tensor of ids (N, T))` that returns logits
# `(N, T, vocab)` as a Tensor: your GPT, or a small table in the tests.


# %% nbgrader={"grade": false, "grade_id": "bits", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def heldout_bits_per_char(model, ids, chars: int, window: int) -> float:
    """Bits per character of the targets in non-overlapping windows of `ids`, by `model`."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ShapeError(f"ids must be a 1-d array of token ids, got {ids.dtype} {ids.shape}")
    count = (len(ids) - 1) // window if window > 0 else 0
    if count < 1:
        raise ShapeError(f"{len(ids)} ids hold no window of {window} + 1 tokens; pass more text")
    if chars <= 0:
        raise ValueError(f"chars must be positive (the characters the targets spell), got {chars}")
    ### BEGIN SOLUTION
    rows = ids[: count * window + 1]
    inputs = rows[:-1].reshape(count, window)  # (N, window)
    targets = rows[1:].reshape(count, window)  # each input's next token
    with no_grad():
        nats = cross_entropy(model(Tensor(inputs)), targets).item() * targets.size
    return float(nats / math.log(2) / chars)
    ### END SOLUTION


# %% [markdown]
# ## 2. Keeping the rules
#
# `violation(event, measured, baseline, budget)` returns `None` when an entry keeps the event's
# rules, else one sentence saying which rule it broke, so that a leaderboard can show why an entry
# scored nothing. The rules, in this order:
#
# 1. Every measurement is a finite number, and `bytes` and `tokens_per_second` are positive
#    (a model that measured as nothing did not run).
# 2. If the event has a `quality_slack`, the entry's bits/char is at most
#    `baseline.bits_per_char * (1 + quality_slack)`.
# 3. If the event is `trained_within_budget`, the entry's `train_cpu_seconds` is at most `budget`.
#
# Write the sentences with the numbers in them, exactly in these words (the tests compare them):
#
# - rule 2: `f"bits/char {bits:.3f} is above the bound {bound:.3f} (baseline {base:.3f} + {slack:.0%})"`,
#   for example `"bits/char 2.104 is above the bound 2.091 (baseline 2.050 + 2%)"`;
# - rule 3: `f"training took {seconds:.1f} CPU-s, over the budget of {budget:g}"`, for example
#   `"training took 61.0 CPU-s, over the budget of 60"`;
# - rule 1: any sentence (the tests only check that there is one).
#
# A bound is kept at equality: bits/char exactly at the bound, or training exactly at the budget,
# breaks no rule.


# %% nbgrader={"grade": false, "grade_id": "violation", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def violation(event: Contest, measured: Measured, baseline: Measured, budget: float = math.inf):
    """None if `measured` keeps `event`'s rules against `baseline`, else the broken rule."""
    ### BEGIN SOLUTION
    numbers = (measured.tokens_per_second, measured.bytes, measured.bits_per_char)
    if not all(math.isfinite(float(x)) for x in numbers):
        return f"a measurement is not a finite number: {numbers}"
    if measured.tokens_per_second <= 0 or measured.bytes <= 0:
        return "the model measured no bytes or no tokens per second: it did not run"
    if event.quality_slack is not None:
        bound = baseline.bits_per_char * (1 + event.quality_slack)
        if measured.bits_per_char > bound:
            return (
                f"bits/char {measured.bits_per_char:.3f} is above the bound {bound:.3f} "
                f"(baseline {baseline.bits_per_char:.3f} + {event.quality_slack:.0%})"
            )
    if event.trained_within_budget and measured.train_cpu_seconds > budget:
        return (
            f"training took {measured.train_cpu_seconds:.1f} CPU-s, over the budget of {budget:g}"
        )
    return None
    ### END SOLUTION


# %% [markdown]
# ## 3. Scores
#
# An entry's score in one event is its **improvement** over the baseline, a number above 1 when it
# is better: `measured / baseline` for a metric where higher is better (tokens per second),
# `baseline / measured` where lower is better (bytes, bits/char). `improvement(metric, ...)`
# computes it for one metric.
#
# The all-around score is the geometric mean of the speed, size and quality improvements,
# `(speed * size * quality) ** (1/3)`: doubling the speed is worth as much as halving the size,
# and no single event can carry the score alone.
#
# `score(event, measured, baseline, budget)` is 0 for an entry that broke a rule, else its
# improvement in that event (the all-around score for `all-around`).


# %% nbgrader={"grade": false, "grade_id": "score", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def improvement(metric: str, measured: Measured, baseline: Measured) -> float:
    """How many times better `measured` is than `baseline` in `metric` (> 1 is better)."""
    if metric not in HIGHER_IS_BETTER:
        raise ValueError(f"no metric '{metric}'; the metrics are: {', '.join(HIGHER_IS_BETTER)}")
    ### BEGIN SOLUTION
    mine, theirs = measured.metric(metric), baseline.metric(metric)
    return mine / theirs if HIGHER_IS_BETTER[metric] else theirs / mine
    ### END SOLUTION


def all_around(measured: Measured, baseline: Measured) -> float:
    """The geometric mean of the speed, size and quality improvements."""
    ### BEGIN SOLUTION
    ratios = [improvement(m, measured, baseline) for m in HIGHER_IS_BETTER]
    return float(np.prod(ratios) ** (1 / len(ratios)))
    ### END SOLUTION


def score(
    event: Contest, measured: Measured, baseline: Measured, budget: float = math.inf
) -> float:
    """0 for an entry that broke a rule, else its improvement over the baseline in `event`."""
    ### BEGIN SOLUTION
    if violation(event, measured, baseline, budget) is not None:
        return 0.0
    if event.metric == "score":
        return all_around(measured, baseline)
    return improvement(event.metric, measured, baseline)
    ### END SOLUTION


# %% [markdown]
# ## 4. Your entry
#
# With the rules written, enter the contest from a terminal. Train a run (`tito milestone run gpt`,
# or `--quick` for a small one), then write `runs/gpt/olympics.json`, for example
#
#     {"name": "ada", "transforms": ["accelerate", "quantize:int8-per-channel"]}
#
# and let the tool measure it, first the baseline (the same run with no transformation) and then
# your entry:
#
#     tito olympics run speed --run runs/gpt
#     tito olympics leaderboard
#
# The transformations the tool knows are listed by `tito olympics run --help`; each uses the
# package's code of the module that teaches it (15 quantization, 16 compression, 18
# acceleration), so it runs your own code where you completed that module.

# %% [markdown]
# ## Tests
#
# Each graded cell is a probe: it runs your code on random inputs and returns the numbers, which
# the grader compares with the reference's on inputs of its own choosing.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded


class TableModel:
    """A bigram model: the logits of each next token are a row of a fixed table."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float64)

    def __call__(self, ids):
        return Tensor(self.table[np.asarray(ids.data, dtype=np.int64)])


def random_measured(rng, base: Measured) -> Measured:
    return Measured(
        tokens_per_second=base.tokens_per_second * float(rng.uniform(0.5, 3.0)),
        bytes=int(base.bytes * float(rng.uniform(0.2, 1.5))),
        bits_per_char=base.bits_per_char * float(rng.uniform(0.9, 1.1)),
        train_cpu_seconds=float(rng.uniform(0, 120)),
    )


# %% nbgrader={"grade": true, "grade_id": "test-bits", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-9, grades="bits")
def test_heldout_bits_per_char(rng):  # float32 logits and cross-entropy: rtol 1e-5
    vocab = int(rng.integers(3, 12))
    model = TableModel(rng.normal(0, 3, size=(vocab, vocab)))
    ids = rng.integers(0, vocab, size=int(rng.integers(40, 90)))
    window = int(rng.integers(2, 9))
    chars = int(rng.integers(50, 400))
    bits = heldout_bits_per_char(model, ids, chars, window)
    uniform = heldout_bits_per_char(TableModel(np.zeros((vocab, vocab))), ids, chars, window)
    targets = ((len(ids) - 1) // window) * window
    assert np.isclose(uniform, targets * math.log2(vocab) / chars)  # every token 1/vocab
    return {"bits": bits, "uniform": uniform}


# %% nbgrader={"grade": true, "grade_id": "test-violation", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(grades="violation")
def test_violation(rng):
    base = Measured(float(rng.uniform(100, 900)), int(rng.integers(10**5, 10**7)),
                    float(rng.uniform(1.5, 3.0)))  # fmt: skip
    verdicts = []
    for _ in range(40):
        entry = random_measured(rng, base)
        for e in EVENTS.values():
            verdicts.append(violation(e, entry, base, budget=60.0) is None)
    broken = Measured(0.0, base.bytes, base.bits_per_char)
    assert violation(EVENTS["speed"], broken, base) is not None
    assert violation(EVENTS["speed"], base, base) is None
    return {"kept": np.array(verdicts, dtype=np.int64)}


# %% nbgrader={"grade": true, "grade_id": "test-score", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="score")
def test_score(rng):
    base = Measured(float(rng.uniform(100, 900)), int(rng.integers(10**5, 10**7)),
                    float(rng.uniform(1.5, 3.0)))  # fmt: skip
    scores = []
    for _ in range(40):
        entry = random_measured(rng, base)
        scores += [score(e, entry, base, budget=60.0) for e in EVENTS.values()]
        scores += [improvement(m, entry, base) for m in HIGHER_IS_BETTER]
    assert abs(score(EVENTS["all-around"], base, base) - 1.0) < 1e-9
    return {"scores": np.array(scores)}
