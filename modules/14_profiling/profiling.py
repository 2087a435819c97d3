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
# # Module 14 — Profiling: where the time and memory of a GPT go
#
# Module 13 ended with a GPT that trains and writes. Before making it faster or smaller (the
# modules after this one) you need to know what it spends, and on what: the operation that looks
# expensive in the code is often not the one that costs. A profiler answers with numbers, and you
# build one from four kinds of them:
#
# 1. **Counts**: parameters per layer, and the floating-point operations (FLOPs) of every
#    operation, from the shapes alone: exact and machine-independent.
# 2. **Times per operation**, measured while a real training step runs. `Function.apply` and
#    `Module.__call__` tell every active *listener* (`tinytorch.core.hooks`) about each forward,
#    each backward and each layer call. Your profiler is a listener; nothing is patched.
# 3. **Memory**: the bytes of activations the graph keeps for the backward pass, per layer.
# 4. **Latency** of a whole call, with warm-up and repeats, as a median and a spread.
#
# A last check ties the counts to theory: a transformer's training step costs about `6 x
# parameters x tokens` FLOPs plus an attention term, and your count of a real step must agree
# exactly. The given code at the end profiles the GPT you trained and draws where time goes.

# %%
#| default_exp profile.flops

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
"""Counting a model: parameters per layer, FLOPs of each operation from shapes (module 14)."""

from __future__ import annotations

import numpy as np

from tinytorch.core.tensor import ShapeError
from tinytorch.models.scaling import estimate_parameters
from tinytorch.profile.rules import FUSED, SAME_AS, other_flops
from tinytorch.profile.rules import shape_size as _size

# %% [markdown]
# ## 1. Parameters, layer by layer
#
# `named_parameters()` (module 03) lists every trainable tensor once (a tied matrix too), named
# like `blocks.0.attention.q_proj.weight`. Grouping the names by their first `depth` parts:
#
# `depth=1` gives token_embedding, position_embedding, blocks, ln_f; `depth=2` splits `blocks`
# into blocks.0, blocks.1. `parameter_counts(model, depth)` returns `{group: number of parameters}` in the order the
# groups first appear. A name with fewer than `depth` parts before its leaf (`ln_f.gamma` at
# depth 2) is grouped by the parts it has: `ln_f`; a bare leaf (`weight`) is its own group.


# %% nbgrader={"grade": false, "grade_id": "parameters", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def parameter_counts(model, depth: int = 1) -> dict[str, int]:
    """{group of the first `depth` name parts: parameters in it}; tied tensors count once."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"parameter_counts: depth must be a whole number >= 1, got {depth!r}")
    counts: dict[str, int] = {}
    ### BEGIN SOLUTION
    for name, p in model.named_parameters():
        parts = name.split(".")[:-1]  # the leaf (weight, bias, gamma) is not a group
        group = ".".join(parts[:depth]) or name
        counts[group] = counts.get(group, 0) + p.size
    ### END SOLUTION
    return counts


# %% [markdown]
# ## 2. FLOPs of a matrix multiply
#
# `a @ b` with `a` of shape `(..., M, K)` and `b` of shape `(..., K, N)` computes `M x N` dot
# products of length `K` for every matrix in the (broadcast) batch: `K` multiplies and `K`
# additions each, so
#
#     FLOPs = 2 x batch x M x K x N
#
# (a fused multiply-add counts as two). A 1-D `a` is one row (`M = 1`), a 1-D `b` one column
# (`N = 1`). The batch is the product of `np.broadcast_shapes` of the leading axes.
#
# `matmul_flops(a_shape, b_shape)` returns that number, and raises `ShapeError` (one line, both
# shapes in it) when the inner sizes differ.


# %% nbgrader={"grade": false, "grade_id": "matmul", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def matmul_flops(a_shape, b_shape) -> int:
    """FLOPs of `a @ b` for arrays of these shapes: 2 x batch x M x K x N."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if not a_shape or not b_shape:
        raise ShapeError(
            f"matmul_flops needs shapes with at least one axis, got {a_shape}, {b_shape}"
        )
    ### BEGIN SOLUTION
    a2 = (1, *a_shape) if len(a_shape) == 1 else a_shape  # (..., M, K)
    b2 = (*b_shape, 1) if len(b_shape) == 1 else b_shape  # (..., K, N)
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"matmul_flops: shapes {a_shape} @ {b_shape} do not fit: inner sizes {a2[-1]} and "
            f"{b2[-2]} differ"
        )
    batch = _size(np.broadcast_shapes(a2[:-2], b2[:-2]))
    return 2 * batch * a2[-2] * a2[-1] * b2[-1]
    ### END SOLUTION


# %% [markdown]
# ## 3. FLOPs of every operation, forward and backward
#
# The engine's operations fall into two kinds. **Matrix multiplies** (`MatMul` of module 01, which
# module 12's attention uses for `q kᵀ` and `w v`, and the fused `LinearFunction` of module 03)
# you count exactly. **The rest** (additions, GELU, layer norm, softmax, the loss) is counted per
# element at a fixed cost: an `exp` is really many machine instructions, so these counts are
# conventions, small next to the multiplies. The given `tinytorch/profile/rules.py` holds them
# (`other_flops(op, in_shapes, out_shape, phase)`, None for an operation it has no rule for:
# unknown, never silently free), and the rules of module 18's fused kernels (`FUSED`, and
# `SAME_AS` for a kernel that does a lesson operation's arithmetic). Every rule returns a pair
# `(matmul, other)`. Yours:
#
# | operation | forward matmul | forward other |
# |---|---|---|
# | `MatMul(a, b)` | `matmul_flops(a, b)` | 0 |
# | `LinearFunction(x, W (K, N), b)` | `2 rows K N` | `rows N` for the bias, if there is one |
#
# with `rows` the number of vectors in `x` (all its leading axes multiplied together; `_size` of
# a shape, given, multiplies its sizes). Backward: each input whose gradient is computed costs one
# more multiply of the forward's size (`da = g bᵀ`, `db = aᵀ g`; for `Linear`, `dx = g Wᵀ` and
# `dW = xᵀ g`), so a step that needs every gradient costs three times its forward; the bias
# gradient, a sum over the rows, costs `rows N` "other" FLOPs. `needed[i]` says whether input
# `i`'s gradient was computed (the profiler reads it from the gradients the engine returned).


# %% nbgrader={"grade": false, "grade_id": "op-flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def forward_flops(op: str, in_shapes: list, out_shape, kwargs: dict | None = None) -> tuple:
    """(matmul, other) FLOPs of one forward of the operation named `op` (its class name)."""
    op, kwargs = SAME_AS.get(op, op), kwargs or {}
    in_shapes = [tuple(s) for s in in_shapes]
    if op in FUSED:
        return FUSED[op][0](in_shapes, kwargs)
    ### BEGIN SOLUTION
    if op == "MatMul":
        return matmul_flops(in_shapes[0], in_shapes[1]), 0
    if op == "LinearFunction":
        (k, n), rows = in_shapes[1], _size(in_shapes[0][:-1])
        return 2 * rows * k * n, rows * n if len(in_shapes) == 3 else 0
    ### END SOLUTION
    return 0, other_flops(op, in_shapes, out_shape)


def backward_flops(
    op: str, in_shapes: list, out_shape, needed, kwargs: dict | None = None
) -> tuple:
    """(matmul, other) FLOPs of one backward; `needed[i]`: was input i's gradient computed."""
    op, kwargs = SAME_AS.get(op, op), kwargs or {}
    in_shapes, needed = [tuple(s) for s in in_shapes], [bool(x) for x in needed]
    if op in FUSED:
        return FUSED[op][1](in_shapes, needed, kwargs)
    ### BEGIN SOLUTION
    if op == "MatMul":
        return sum(needed[:2]) * matmul_flops(in_shapes[0], in_shapes[1]), 0
    if op == "LinearFunction":
        (k, n), rows = in_shapes[1], _size(in_shapes[0][:-1])
        bias = rows * n if len(in_shapes) == 3 and needed[2] else 0
        return sum(needed[:2]) * 2 * rows * k * n, bias
    ### END SOLUTION
    return 0, other_flops(op, in_shapes, out_shape, "backward") if any(needed) else 0


# %% [markdown]
# ## 4. The whole step, on paper
#
# Every weight matrix of the blocks and the output head is used in one matrix multiply per
# token: `2` FLOPs per weight per token forward, twice that backward (the input's gradient and
# the weight's), so
#
#     training step = 6 x P x tokens + attention term,
#
# where `P` counts the weights that take part in a multiply: per block `4 C²` (q, k, v, out) and
# `2 C H` (the MLP, hidden width `H`), plus `C V` for the head (the token embedding itself when
# the weights are tied). Embedding lookups, biases and norms are not multiplies. The given
# `estimate_parameters(config)["matmul"]` (`tinytorch/models/scaling.py`, the one home of the
# course's parameter arithmetic) is that `P`.
#
# Attention multiplies activations by activations, so it is not in `P`: per layer `q kᵀ` and
# `w v` cost `2 B T² C` each forward (all heads together, `H x D = C`), and the backward twice
# that, so `12 L B T² C` per step. (Causal attention could skip the masked half; this engine
# computes the whole `T x T` square, and the count says what it does.)
#
# `gpt_step_flops(config, batch, seq_len)` returns `matmul_parameters` (P), `parameter_term`,
# `attention_term` and `total` for a `GPTConfig` (module 13).


# %% nbgrader={"grade": false, "grade_id": "analytic", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def gpt_step_flops(config, batch: int, seq_len: int) -> dict[str, int]:
    """Matrix-multiply FLOPs of one training step (forward and backward) of GPT(config)."""
    c, layers = config.embed_dim, config.num_layers
    params = estimate_parameters(config)["matmul"]
    ### BEGIN SOLUTION
    tokens = batch * seq_len
    parameter_term = 6 * params * tokens
    attention_term = 12 * layers * batch * seq_len * seq_len * c
    ### END SOLUTION
    return {"matmul_parameters": params, "parameter_term": parameter_term,
            "attention_term": attention_term, "total": parameter_term + attention_term}  # fmt: skip


# %% [markdown]
# ## 5. A listener that records every operation
#
# `tinytorch.core.hooks.Listener` has four methods the engine calls while a listener is active
# (`with listen(profiler): ...`):
#
# - `forward(fn, inputs, kwargs, output, seconds)` after each operation's forward (`inputs` are
#   the numpy arrays, `fn` the `Function` instance, `seconds` its time);
# - `backward(fn, grad, grads, seconds)` after its backward (`grads`: one array or None per input);
# - `enter(module)` and `exit(module, output, seconds)` around each layer call.
#
# Your `Profiler` keeps `stack`, the dotted names of the layers running now (push on `enter` the
# name `self.names` gives the module, or its class name if it has none; pop on `exit`): the top is
# the layer an operation belongs to, `""` outside any. Each forward appends an
# `OpEvent(op, phase, seconds, matmul_flops, other_flops, bytes_moved, kept_bytes, layer)` (given,
# `tinytorch/profile/events.py`) with `forward_flops`, the bytes of the inputs and the output
# (`nbytes(arrays)`, given), and the bytes the graph **keeps**: the output's, when any input needs
# a gradient (`any(fn.needs_grad)`), else 0. A kept output's forward is remembered in
# `self.seen[id(fn)] = (fn, shapes, out_shape, kwargs, layer, kept)` (holding `fn` keeps its id
# from being reused); its backward pops that entry and appends its own `OpEvent` with
# `backward_flops`, `bytes_moved` the incoming gradient, the returned gradients and the kept
# output, and `kept_bytes` 0. A backward with no entry (no gradient kept, or a forward from
# before the profiler listened) is ignored.
#
# Memory, with a simple model: `live_bytes` grows by each kept output and shrinks by it when that
# operation's backward has run. `peak_bytes` is the largest `live_bytes` becomes.

# %% nbgrader={"grade": false, "grade_id": "profiler-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export profile.profiler
"""Profiling through the engine's listeners: times, FLOPs and kept bytes per operation (module 14)."""

import time
from dataclasses import dataclass

import numpy as np

from tinytorch.bench.quartiles import quartiles
from tinytorch.core.hooks import Listener
from tinytorch.profile.events import OUTSIDE, OpEvent, OpRow, module_names, nbytes


# %% nbgrader={"grade": false, "grade_id": "profiler", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export profile.profiler
class Profiler(Listener):
    """Every operation's forward and backward while active: `with listen(Profiler(model)):`."""

    def __init__(self, model=None):
        self.names = {} if model is None else module_names(model)
        self.events: list[OpEvent] = []
        self.stack: list[str] = []  # dotted names of the layers running now, innermost last
        self.seen: dict[int, tuple] = {}  # id(fn): (fn, shapes, out_shape, kwargs, layer, kept)
        self.live_bytes = 0
        self.peak_bytes = 0

    def enter(self, module) -> None:
        ### BEGIN SOLUTION
        self.stack.append(self.names.get(id(module), type(module).__name__))
        ### END SOLUTION

    def exit(self, module, output, seconds: float) -> None:
        ### BEGIN SOLUTION
        self.stack.pop()
        ### END SOLUTION

    def forward(self, fn, inputs, kwargs, output, seconds: float) -> None:
        op, shapes = type(fn).__name__, [np.shape(a) for a in inputs]
        layer = self.stack[-1] if self.stack else ""
        ### BEGIN SOLUTION
        matmul, other = forward_flops(op, shapes, np.shape(output), kwargs)
        kept = output.nbytes if any(fn.needs_grad) else 0
        moved = nbytes(inputs) + output.nbytes
        self.events.append(OpEvent(op, "forward", seconds, matmul, other, moved, kept, layer))
        if kept:
            self.seen[id(fn)] = (fn, shapes, np.shape(output), kwargs, layer, kept)
            self.live_bytes += kept
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        ### END SOLUTION

    def backward(self, fn, grad, grads, seconds: float) -> None:
        grads = grads if isinstance(grads, tuple) else (grads,)
        if id(fn) not in self.seen:  # its forward ran before this profiler was listening
            return
        ### BEGIN SOLUTION
        _, shapes, out_shape, kwargs, layer, kept = self.seen.pop(id(fn))
        needed = [g is not None for g in grads]
        matmul, other = backward_flops(type(fn).__name__, shapes, out_shape, needed, kwargs)
        moved = grad.nbytes + nbytes(grads) + kept
        self.events.append(OpEvent(type(fn).__name__, "backward", seconds, matmul, other, moved, 0,
                                 layer))  # fmt: skip
        self.live_bytes -= kept
        ### END SOLUTION

    def kept_by_layer(self) -> dict[str, int]:
        """{layer: bytes of forward outputs kept for the backward}, layers in order of first use."""
        out: dict[str, int] = {}
        for e in self.events:
            if e.kept_bytes:
                out[e.layer] = out.get(e.layer, 0) + e.kept_bytes
        return out

    def totals(self) -> dict[str, float]:
        """FLOPs, seconds and kept bytes over every event."""
        return {
            "matmul_flops": sum(e.matmul_flops for e in self.events),
            "other_flops": sum(e.other_flops or 0 for e in self.events),
            "seconds": sum(e.seconds for e in self.events),
            "kept_bytes": sum(e.kept_bytes for e in self.events),
        }


# %% [markdown]
# ## 6. Latency: warm-up, repeats, median and spread
#
# One timing is one sample of a noisy quantity: the first calls pay for cold caches and numpy's
# first allocations, later ones for whatever else runs. `latency(fn, warmup, repeats, clock)`
# calls `fn()` `warmup` times untimed, then `repeats` times reading `clock()` around each call,
# and returns a `Latency`: the times, their median and quartiles (the given `quartiles(times)`
# gives `(q1, median, q3)`, numpy's percentiles at 25, 50, 75). The median ignores a few slow
# outliers; the spread `q3 - q1` says how much to trust it. The clock is a parameter so a test
# can pass a fake one. (Module 19 adds bootstrap intervals and a process per candidate.)


# %% nbgrader={"grade": false, "grade_id": "latency-type", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export profile.profiler
@dataclass(frozen=True)
class Latency:
    times: np.ndarray  # seconds of each timed call
    median: float
    q1: float
    q3: float

    @property
    def spread(self) -> float:
        return self.q3 - self.q1

    def __str__(self) -> str:
        return f"{self.median * 1e3:.3f} ms (q1 {self.q1 * 1e3:.3f}, q3 {self.q3 * 1e3:.3f})"


# %% nbgrader={"grade": false, "grade_id": "latency", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export profile.profiler
def latency(fn, warmup: int = 3, repeats: int = 10, clock=time.perf_counter) -> Latency:
    """Time `repeats` calls of `fn()` after `warmup` untimed ones."""
    for label, n, least in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < least:
            raise ValueError(f"latency: {label} must be a whole number >= {least}, got {n!r}")
    ### BEGIN SOLUTION
    for _ in range(warmup):
        fn()
    times = np.empty(repeats)
    for i in range(repeats):
        start = clock()
        fn()
        times[i] = clock() - start
    q1, median, q3 = quartiles(times)
    return Latency(times, median, q1, q3)
    ### END SOLUTION


# %% [markdown]
# ## 7. One table row per operation
#
# `by_operation(events, wall_seconds=None)` groups the events by `(op, phase)` and returns one
# `OpRow` per group, slowest first (most `seconds`). A row sums its events' `calls` (one per
# event), `seconds`, `matmul_flops`, `other_flops` and `bytes_moved`; its `other_flops` is None
# when any of its events' is (an unknown count stays unknown).
#
# `wall_seconds` is the time of the whole step, measured around it. The operations account for
# less: the rest is Python between them (building the graph, the optimizer's update, the KV
# cache's copies). When `wall_seconds` is larger than the operations' total, `by_operation`
# appends, last, a row `OpRow(OUTSIDE, "", 0, wall_seconds - total, 0, 0, 0)` for that remainder
# (`OUTSIDE = "(outside operations)"`). When `wall_seconds` is None (or not larger), there is no
# such row and the total of the operations stands for the wall time. Each row's `share` is its
# `seconds` over that wall time (0 if it is 0), so the shares add up to one. The given `OpRow`
# (`OpRow(op, phase, calls, seconds, matmul_flops, other_flops, bytes_moved, share=0.0)`) adds
# `flops`, `kind` ("matmul", "other" or "outside"), `gflops` and `intensity` (FLOPs per byte).


# %% nbgrader={"grade": false, "grade_id": "by-operation", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export profile.profiler
def by_operation(events: list[OpEvent], wall_seconds: float | None = None) -> list[OpRow]:
    """One row per (op, phase), slowest first, plus the time outside operations."""
    rows: dict[tuple, OpRow] = {}
    ### BEGIN SOLUTION
    for e in events:
        row = rows.setdefault((e.op, e.phase), OpRow(e.op, e.phase, 0, 0.0, 0, 0, 0))
        row.calls += 1
        row.seconds += e.seconds
        row.matmul_flops += e.matmul_flops
        row.other_flops = None if row.other_flops is None or e.other_flops is None else (
            row.other_flops + e.other_flops
        )  # fmt: skip
        row.bytes_moved += e.bytes_moved
    measured = sum(r.seconds for r in rows.values())
    wall = measured if wall_seconds is None else max(wall_seconds, measured)
    out = sorted(rows.values(), key=lambda r: r.seconds, reverse=True)
    if wall > measured:
        out.append(OpRow(OUTSIDE, "", 0, wall - measured, 0, 0, 0))
    for row in out:
        row.share = row.seconds / wall if wall > 0 else 0.0
    ### END SOLUTION
    return out


def matmul_share(rows: list[OpRow]) -> float:
    """The share of the time spent in matrix multiplies."""
    return sum(r.share for r in rows if r.kind == "matmul")


# %% [markdown]
# ## 8. Your profiler on the GPT you trained (given)
#
# Given files run your code on a real model. `profile_step` and `profile_generation`
# (`tinytorch/profile/runs.py`) run training steps or `model.generate` under your `Profiler`,
# timing each whole run for the outside row, and measure the real peak with `tracemalloc`.
# `tinytorch/profile/report.py` measures this machine's two **roofs** with your `latency` (a
# large matmul's rate, the copy bandwidth): an operation with few FLOPs per byte cannot beat
# `bandwidth x intensity`. `tour()` (`tinytorch/profile/tour.py`) profiles the GPT of `tito
# milestone run gpt` (or a fresh small one) on one BLAS thread, prints the tables and draws them.
# It imports your profiler from the package: run `tito module export 14` first.

# %% tags=["demo"]
from tinytorch.profile.tour import tour

found = tour()
found["figures"]["step"]

# %% [markdown]
# What to look for. Matrix multiplies carry most FLOPs and time, well below the roof: `(B T, 64)
# @ (64, 64)` is too thin for the BLAS to reuse what it loads. Layer norm, GELU, softmax and the
# loss do about one FLOP per byte: far more of the time than of the FLOPs. Module 17's cached
# attention works on numpy arrays outside the engine: its time lands in the outside row. These
# are module 18's targets.
#
# ## Tests
# Each graded cell is a probe (`@graded`): it runs your code on seeded inputs, asserts what must
# hold, and returns counts (never timings) for the grader to compare with the reference's.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded
from tinytorch.core.autograd import topological_order
from tinytorch.core.hooks import listen
from tinytorch.core.layers import Linear
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.core.transformer import GPT, count_parameters, estimate_parameters


def _random_gpt(rng, tie: bool):
    np.random.seed(int(rng.integers(1000)))
    heads = int(rng.integers(1, 3))
    return GPT(vocab_size=int(rng.integers(10, 30)), embed_dim=8 * heads, num_layers=int(rng.integers(1, 3)),
               num_heads=heads, max_seq_len=8, tie_weights=tie)  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-parameters", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="parameters")
def test_parameter_counts(rng):
    model = _random_gpt(rng, tie=bool(rng.integers(2)))
    top, blocks = parameter_counts(model), parameter_counts(model, depth=2)
    assert sum(top.values()) == sum(blocks.values()) == count_parameters(model)
    assert sum(top.values()) == estimate_parameters(model.config)["exact"]
    assert list(top)[:3] == ["token_embedding", "position_embedding", "blocks"]
    assert (
        "blocks.0" in blocks and "ln_f" in blocks and blocks["ln_f"] == 2 * model.config.embed_dim
    )
    return {"top": list(top.values()), "blocks": list(blocks.values())}


# %% nbgrader={"grade": true, "grade_id": "test-matmul", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="matmul")
def test_matmul_flops(rng):
    m, k, n, b = (int(v) for v in rng.integers(1, 7, size=4))
    cases = [((m, k), (k, n)), ((b, 1, m, k), (3, k, n)), ((k,), (b, k, n)), ((b, m, k), (k,))]
    counts = []
    for a_shape, b_shape in cases:
        out = np.ones(a_shape) @ np.ones(b_shape)  # every entry is one dot product of length k
        counts.append(matmul_flops(a_shape, b_shape))
        assert counts[-1] == 2 * np.size(out) * k
    try:
        matmul_flops((m, k), (k + 1, n))
    except ShapeError:
        pass
    else:
        raise AssertionError("matmul_flops must reject shapes whose inner sizes differ")
    return {"flops": counts}


# %% nbgrader={"grade": true, "grade_id": "test-layer-flops", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="op-flops")
def test_linear_and_matmul_flops(rng):
    rows, k, n = (int(v) for v in rng.integers(2, 9, size=3))
    layer = Linear(k, n)
    x = Tensor(rng.normal(size=(2, rows, k)), requires_grad=True)
    profiler = Profiler(layer)
    with listen(profiler):
        layer(x).sum().backward()
    phases = ("forward", "backward")
    linear = [sum(e.matmul_flops for e in profiler.events if e.phase == p) for p in phases]
    assert linear[0] == 2 * 2 * rows * k * n and linear[1] == 2 * linear[0]  # dx and dW
    assert {e.layer for e in profiler.events if e.matmul_flops} == {"model"}
    assert profiler.stack == [] and profiler.live_bytes == 0
    a = Tensor(rng.normal(size=(3, rows, k)), requires_grad=True)
    b = Tensor(rng.normal(size=(k, n)))  # no gradient: the backward computes da only
    profiler = Profiler()
    with listen(profiler):
        (a @ b).sum().backward()
    matmul = [e for e in profiler.events if e.op == "MatMul"]
    assert matmul[0].matmul_flops == matmul[1].matmul_flops == 2 * 3 * rows * k * n
    bias = backward_flops("LinearFunction", [(rows, k), (k, n), (n,)], (rows, n), [1, 0, 1])
    return {"linear": linear, "matmul": [e.matmul_flops for e in matmul],
            "bias": list(bias)}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-gpt-step", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="analytic")
def test_gpt_step_flops_match_the_analytic_count(rng):
    model = _random_gpt(rng, tie=bool(rng.integers(2)))
    batch, steps = int(rng.integers(1, 4)), int(rng.integers(2, 9))
    tokens = rng.integers(0, model.vocab_size, size=(batch, steps))
    profiler = Profiler(model)
    with listen(profiler):
        cross_entropy(model(tokens), tokens).backward()
    totals = profiler.totals()
    analytic = gpt_step_flops(model.config, batch, steps)
    assert totals["matmul_flops"] == analytic["total"]
    forward = sum(e.matmul_flops for e in profiler.events if e.phase == "forward")
    assert 3 * forward == totals["matmul_flops"]
    return {"counted": totals["matmul_flops"], "other": totals["other_flops"],
            "analytic": [analytic[k] for k in ("matmul_parameters", "parameter_term", "attention_term")]}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-memory", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="profiler")
def test_kept_activation_bytes(rng):
    model = _random_gpt(rng, tie=False)
    tokens = rng.integers(0, model.vocab_size, size=(2, 8))
    profiler = Profiler(model)
    with listen(profiler):
        loss = cross_entropy(model(tokens), tokens)
        kept = sum(t.data.nbytes for t in topological_order(loss) if t._ctx is not None)
        assert profiler.live_bytes == profiler.peak_bytes == kept
        loss.backward()
    layers = profiler.kept_by_layer()
    assert sum(layers.values()) == kept and profiler.live_bytes == 0
    assert "blocks.0.attention" in layers and "blocks.0.mlp.linear1" in layers
    frozen = _random_gpt(rng, tie=False)  # nothing needs a gradient: nothing is kept
    for p in frozen.parameters():
        p.requires_grad = False
    quiet = Profiler(frozen)
    with listen(quiet):
        frozen(rng.integers(0, frozen.vocab_size, size=(2, 8)))
    return {"kept": kept, "layers": list(layers.values()), "frozen": quiet.peak_bytes}


# %% nbgrader={"grade": true, "grade_id": "test-latency", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="latency")
def test_latency_with_a_fake_clock(rng):
    steps = rng.uniform(0.5, 2.0, size=30)
    ticks = iter(np.cumsum(np.repeat(steps, 2)))  # each timed call lasts one step of the clock
    calls = []
    result = latency(lambda: calls.append(1), warmup=3, repeats=9, clock=lambda: next(ticks))
    assert len(calls) == 12 and result.times.shape == (9,)
    assert result.q1 <= result.median <= result.q3 and result.spread >= 0
    return {"times": result.times, "stats": [result.median, result.q1, result.q3]}


# %% nbgrader={"grade": true, "grade_id": "test-by-operation", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12, grades="by-operation")
def test_rows_by_operation(rng):
    ops = ["MatMul", "Add", "LinearFunction", "Add", "MatMul"]
    events = [OpEvent(op, phase, float(rng.uniform(0.1, 1)), int(rng.integers(100)) * (op != "Add"),
                    int(rng.integers(50)), 10, 0, "") for op in ops for phase in ("forward", "backward")]  # fmt: skip
    wall = sum(e.seconds for e in events) * 1.25
    rows = by_operation(events, wall)
    assert [r.seconds for r in rows[:-1]] == sorted((r.seconds for r in rows[:-1]), reverse=True)
    assert len(rows) == 7 and rows[-1].op == "(outside operations)"
    assert abs(sum(r.share for r in rows) - 1) < 1e-9 and abs(rows[-1].share - 0.2) < 1e-9
    rows.sort(key=lambda r: (r.op, r.phase))
    return {"calls": [r.calls for r in rows], "flops": [r.flops for r in rows],
            "share": [r.share for r in rows], "matmul": matmul_share(rows)}  # fmt: skip
