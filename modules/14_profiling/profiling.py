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
# modules after this one) you need to know what it spends, and on what. Guessing is unreliable:
# the operation that looks expensive in the code is often not the one that costs. A profiler
# answers with numbers, and this module builds one from four kinds of them:
#
# 1. **Counts**: parameters per layer, and the floating-point operations (FLOPs) of every
#    operation, worked out from the shapes alone. Counts are exact and machine-independent.
# 2. **Times per operation**, measured while a real training step runs. The engine offers a
#    hook for this (`tinytorch.core.hooks`): `Function.apply` and `Module.__call__` tell every
#    active *listener* about each forward, each backward and each layer call. Your profiler is a
#    listener; nothing in `Tensor` is patched.
# 3. **Memory**: the bytes of activations the graph keeps for the backward pass, per layer, and
#    the peak the whole step really reaches.
# 4. **Latency** of a whole call, with warm-up and repeats, reported as a median and a spread.
#
# Put together they say where the time goes (in matrix multiplies, or in the rest) and how well
# each operation uses the machine: its achieved GFLOP/s against the rate this computer reaches on
# one large matrix multiply, which you measure too.
#
# A last check ties the counts to theory: a training step of a transformer costs about
# `6 x parameters x tokens` FLOPs, plus a term for attention. Your count of a real step must
# agree with that formula exactly.

# %%
#| default_exp profile.flops

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
"""Counting a model: parameters per layer, FLOPs of each operation from shapes (module 14)."""

from __future__ import annotations

import math

import numpy as np

from tinytorch.core.tensor import ShapeError


def _size(shape) -> int:
    return math.prod(int(n) for n in shape)


# %% [markdown]
# ## 1. Parameters, layer by layer
#
# `named_parameters()` (module 03) lists every trainable tensor once, with a dotted name such as
# `blocks.0.attention.q_proj.weight`; a tied matrix appears once. Grouping the names by their
# first `depth` parts gives a table of where the parameters sit:
#
# ```
# depth=1: token_embedding, position_embedding, blocks, ln_f
# depth=2: token_embedding, position_embedding, blocks.0, blocks.1, ln_f
# ```
#
# `parameter_counts(model, depth)` returns `{group: number of parameters}` in the order the
# groups first appear. A name with fewer than `depth` parts before its leaf (`ln_f.gamma` at
# depth 2) is grouped by the parts it has: `ln_f`.


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
# are counted exactly. **The rest** (additions, GELU, layer norm, softmax, the loss) is counted
# per element at a fixed cost: an `exp` or a square root is really many machine instructions, so
# these counts are conventions, and they are small next to the multiplies.
#
# Every rule returns a pair `(matmul, other)`.
#
# | operation | forward matmul | forward other |
# |---|---|---|
# | `MatMul(a, b)` | `matmul_flops(a, b)` | 0 |
# | `LinearFunction(x, W (K, N), b)` | `2 rows K N` | `rows N` for the bias, if there is one |
#
# with `rows` the number of vectors in `x` (all its leading axes multiplied together).
#
# Backward: each input whose gradient is computed costs one more multiply of the same size
# (`da = g bᵀ` and `db = aᵀ g` have the forward's FLOPs each; for `Linear`, `dx = g Wᵀ` and
# `dW = xᵀ g`), so a step that needs every gradient costs three times its forward; the bias
# gradient is a sum over the rows, `rows N` "other" FLOPs. `needed` tells which gradients the
# backward computed: the profiler reads it from the gradients the engine returned.
#
# The "other" costs are given below (`ELEMENTWISE`, `REDUCTIONS`, `FREE`), a forward and a
# backward cost per element each: `Add`'s backward passes its gradient on unchanged (no FLOPs),
# `Mul`'s multiplies twice (one product per input). An operation with no rule is counted as
# unknown (`None`, shown as "-"), never silently as free. Module 18's fused kernels do the
# arithmetic of the lessons they replace: `SAME_AS` maps three of them to a lesson's operation, and
# the given `FUSED` rules count its packed projection and its one-node attention.
# You write the rules of `MatMul` and `LinearFunction` in `forward_flops` and `backward_flops`.


# %% nbgrader={"grade": false, "grade_id": "rules", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
# (forward, backward) FLOPs per output element; exp, log, tanh count as one, GELU's tanh formula
# as eight forward and twelve backward
ELEMENTWISE = {"Add": (1, 0), "Sub": (1, 1), "Mul": (1, 2), "Div": (1, 4), "Neg": (1, 1),
               "Pow": (1, 3), "Exp": (1, 1), "Log": (1, 1), "ReLUFunction": (1, 1),
               "SigmoidFunction": (3, 3), "TanhFunction": (1, 3), "GELUFunction": (8, 12),
               "SoftmaxFunction": (5, 4), "LayerNormFunction": (8, 10),
               "DropoutFunction": (1, 1)}  # fmt: skip
# (forward, backward) FLOPs per input element
REDUCTIONS = {"Sum": (1, 0), "Mean": (1, 1), "Max": (1, 2), "CrossEntropyFunction": (5, 3),
              "MSEFunction": (3, 3)}  # fmt: skip
# moving data, no arithmetic
FREE = {"Reshape", "Permute", "GetItem", "EmbeddingLookup"}
MATMUL_OPS = ("MatMul", "LinearFunction", "QKVProjection", "FusedAttention")
# module 18's fused kernels that do the arithmetic of one lesson operation
SAME_AS = {"FusedLayerNorm": "LayerNormFunction", "FusedGELU": "GELUFunction",
           "SortedEmbeddingLookup": "EmbeddingLookup"}  # fmt: skip
SOFTMAX = 5  # max, subtract, exp, sum, scale: per score


def other_flops(op: str, in_shapes: list, out_shape, phase: str = "forward") -> int | None:
    """FLOPs of an operation that is not a matrix multiply; None for one the rules do not know."""
    column = 0 if phase == "forward" else 1
    if op in ELEMENTWISE:
        return ELEMENTWISE[op][column] * _size(out_shape)
    if op in REDUCTIONS:
        return REDUCTIONS[op][column] * _size(in_shapes[0])
    if op in FREE:
        return 0
    return None


def _projection(in_shapes, has_bias: bool):
    """n, rows, K, N of module 18's QKVProjection (x, W_1..W_n, b_1..b_n)."""
    n = (len(in_shapes) - 1) // 2 if has_bias else len(in_shapes) - 1
    k, m = in_shapes[1]
    return n, _size(in_shapes[0][:-1]), k, m


def _attention(in_shapes):
    """b, Tq, Tk, D, Dv of module 18's FusedAttention of q, k, v or one packed (3, ...) input."""
    q, k, v = in_shapes if len(in_shapes) == 3 else (tuple(in_shapes[0][1:]),) * 3
    batch = _size(np.broadcast_shapes(tuple(q[:-2]), tuple(k[:-2]), tuple(v[:-2])))
    return batch, q[-2], k[-2], q[-1], v[-1]


def _projection_forward(in_shapes, kwargs):
    has_bias = kwargs.get("has_bias", False)
    n, rows, k, m = _projection(in_shapes, has_bias)
    return n * 2 * rows * k * m, n * rows * m if has_bias else 0


def _projection_backward(in_shapes, needed, kwargs):
    n, rows, k, m = _projection(in_shapes, kwargs.get("has_bias", False))
    multiplies = (n if needed[0] else 0) + sum(needed[1 : 1 + n])
    adds = (n - 1) * rows * k if needed[0] else 0  # dx sums the n projections' parts
    return multiplies * 2 * rows * k * m, adds + sum(needed[1 + n :]) * rows * m


def _attention_forward(in_shapes, kwargs):
    b, tq, tk, d, dv = _attention(in_shapes)
    scores = b * tq * tk
    masked = scores if kwargs.get("mask") is not None else 0
    return 2 * scores * (d + dv), b * tq * d + masked + SOFTMAX * scores  # scale, mask, softmax


def _attention_backward(in_shapes, needed, kwargs):
    b, tq, tk, d, dv = _attention(in_shapes)
    need_q, need_k, need_v = needed * 3 if len(needed) == 1 else needed
    scores = b * tq * tk
    matmul = 2 * scores * dv if need_v else 0  # dv = wᵀ g
    if not (need_q or need_k):
        return matmul, 0
    matmul += 2 * scores * dv + (need_q + need_k) * 2 * scores * d  # ds = g vᵀ, then dq, dk
    return matmul, 2 * b * tq * dv + 3 * scores  # rowsum(g * out), subtract, times w, scale


# module 18's fused kernels: (forward rule, backward rule)
FUSED = {"QKVProjection": (_projection_forward, _projection_backward),
         "FusedAttention": (_attention_forward, _attention_backward)}  # fmt: skip


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
# token: `2` FLOPs per weight per token forward, twice that backward (one multiply for the input
# gradient, one for the weight's), so
#
#     training step = 6 x P x tokens + attention term,
#
# where `P` counts the weights that take part in a multiply: per block `4 C²` (q, k, v, out) and
# `2 C H` (the MLP, hidden width `H`), plus `C V` for the head (the token embedding itself when
# the weights are tied). Embedding lookups, biases and norms are not multiplies.
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
    c, layers, v = config.embed_dim, config.num_layers, config.vocab_size
    hidden = int(c * config.mlp_ratio)
    ### BEGIN SOLUTION
    params = layers * (4 * c * c + 2 * c * hidden) + c * v
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
# - `backward(fn, grad, grads, seconds)` after its backward (`grads`: one array or `None` per
#   input);
# - `enter(module)` and `exit(module, output, seconds)` around each layer call.
#
# Your `Profiler` keeps a stack of the layers being run (push on `enter`, pop on `exit`): the
# top of the stack is the layer an operation belongs to. For each forward it appends an `Event`
# with the FLOPs (`forward_flops`), the bytes it read and wrote, and the bytes the graph **keeps**:
# the output, when any input needs a gradient (`any(fn.needs_grad)`), since the backward will
# need it. It remembers what it saw of `fn` (shapes, kwargs, layer, kept bytes) in `self.seen`,
# keyed by `id(fn)`, holding `fn` itself so the id is not reused. The backward then finds them
# there for `backward_flops`.
#
# Memory, with a simple model: the live activations grow by each kept output and shrink when that
# operation's backward has run (its gradient has passed, the output is not needed any more).
# `peak_bytes` is the largest the live total becomes; `kept_by_layer()` sums kept bytes per layer.

# %% nbgrader={"grade": false, "grade_id": "profiler-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export profile.profiler
"""Profiling through the engine's listeners: times, FLOPs and kept bytes per operation (module 14)."""

import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.hooks import Listener, listen
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor


@dataclass
class Event:
    """One forward or backward of one operation."""

    op: str  # the Function's class name
    phase: str  # "forward" or "backward"
    seconds: float
    matmul_flops: int
    other_flops: int | None  # None: an operation the rules do not know
    bytes_moved: int  # arrays read and written
    kept_bytes: int  # forward output the graph keeps for the backward (0 otherwise)
    layer: str  # dotted name of the innermost layer running it ("" outside any)

    @property
    def flops(self) -> int:
        return self.matmul_flops + (self.other_flops or 0)


def module_names(model) -> dict[int, str]:
    """{id(module): dotted name} for `model` and every module below it; the model is "model"."""
    names = {id(model): "model"}

    def walk(module, prefix):
        for name, child in module.children():
            if hasattr(child, "children") and id(child) not in names:
                names[id(child)] = prefix + name
                walk(child, f"{prefix}{name}.")

    walk(model, "")
    return names


def _nbytes(arrays) -> int:
    return sum(getattr(a, "nbytes", 0) for a in arrays if a is not None)


# %% nbgrader={"grade": false, "grade_id": "profiler", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export profile.profiler
class Profiler(Listener):
    """Every operation's forward and backward while active: `with listen(Profiler(model)):`."""

    def __init__(self, model=None):
        self.names = {} if model is None else module_names(model)
        self.events: list[Event] = []
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
        moved = _nbytes(inputs) + output.nbytes
        self.events.append(Event(op, "forward", seconds, matmul, other, moved, kept, layer))
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
        moved = grad.nbytes + _nbytes(grads) + kept
        self.events.append(Event(type(fn).__name__, "backward", seconds, matmul, other, moved, 0,
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
# A single timing of a call is one sample of a noisy quantity. The first calls pay for cold
# caches and for numpy allocating its buffers; later ones are disturbed by whatever else the
# machine runs. So `latency(fn, warmup, repeats)` calls `fn()` `warmup` times without timing,
# then `repeats` times reading `clock()` just before and after each call, and returns a
# `Latency`: the times, their median, and the quartiles `q1` and `q3` (`np.percentile` at 25 and
# 75). The median ignores a few slow outliers; the spread `q3 - q1` says how much to trust it.
# The clock is a parameter, so a test can pass a fake one.
#
# (Module 19 goes further: bootstrap intervals and a process per candidate.)


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
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return Latency(times, float(median), float(q1), float(q3))
    ### END SOLUTION


# %% [markdown]
# ## 7. One table row per operation
#
# `by_operation(events, wall_seconds)` groups the events by `(op, phase)` and returns one `OpRow`
# per group, slowest first: calls, seconds, FLOPs, bytes moved, the share of `wall_seconds` (the
# time of the whole step, measured around it) and the achieved rate `flops / seconds`.
#
# The time the operations account for is less than the wall time: the rest is Python between
# them (building the graph, the optimizer's update, the KV cache's copies). `by_operation` adds a
# row `"(outside operations)"` with that remainder, so the shares add up to one.

# %% nbgrader={"grade": false, "grade_id": "row-type", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export profile.profiler
OUTSIDE = "(outside operations)"


@dataclass
class OpRow:
    op: str
    phase: str
    calls: int
    seconds: float
    matmul_flops: int
    other_flops: int | None
    bytes_moved: int
    share: float = 0.0  # of the wall time

    @property
    def flops(self) -> int:
        return self.matmul_flops + (self.other_flops or 0)

    @property
    def kind(self) -> str:
        return "matmul" if self.op in MATMUL_OPS else "outside" if self.op == OUTSIDE else "other"

    @property
    def gflops(self) -> float:
        """Achieved GFLOP/s."""
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved: where the operation sits on the roofline's x axis."""
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0


# %% nbgrader={"grade": false, "grade_id": "by-operation", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export profile.profiler
def by_operation(events: list[Event], wall_seconds: float | None = None) -> list[OpRow]:
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
# ## 8. Profiling a training step and a generation (given)
#
# `profile_step` runs one training step of a language model, forward, loss, backward and (with
# an optimizer) the update, under your profiler, timing the whole step around it. A second run
# measures the real peak with `tracemalloc`, which numpy reports every array allocation to:
# weights' gradients, temporaries and all. Tracing slows Python down, so that run is not timed.
#
# `profile_generation` does the same for `model.generate`: with module 17 in your package,
# generation uses its KV cache (one new position per step); before it, every step recomputes the
# whole context.


# %% nbgrader={"grade": false, "grade_id": "runs", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export profile.profiler
@dataclass
class Profile:
    profiler: Profiler  # the events of every profiled repeat
    wall_seconds: float  # of all repeats together
    traced_peak_bytes: int  # measured with tracemalloc, in a run of its own
    repeats: int = 1

    @property
    def rows(self) -> list[OpRow]:
        return by_operation(self.profiler.events, self.wall_seconds)


def _traced_peak(fn) -> int:
    running = tracemalloc.is_tracing()
    if not running:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        if not running:
            tracemalloc.stop()


def profile_step(
    model, tokens, targets, optimizer=None, warmup: int = 1, repeats: int = 3
) -> Profile:
    """`repeats` training steps under the profiler, after `warmup` untimed ones."""
    targets = np.asarray(targets)

    def step():
        loss = cross_entropy(model(Tensor(tokens)), targets)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad()
        else:
            model.zero_grad()

    for _ in range(warmup):
        step()
    return _profiled(model, step, repeats)


def _profiled(model, run, repeats: int) -> Profile:
    profiler, wall = Profiler(model), 0.0
    with listen(profiler):
        for _ in range(repeats):  # several, so one interruption weighs less
            began = time.perf_counter()
            run()
            wall += time.perf_counter() - began
    return Profile(profiler, wall, _traced_peak(run), repeats)


def profile_generation(model, prompt, new_tokens: int = 32, repeats: int = 3, **kwargs) -> Profile:
    """`model.generate(prompt, new_tokens, **kwargs)` under the profiler (greedy by default)."""
    kwargs.setdefault("temperature", 0)

    def run():
        with no_grad():
            model.generate(prompt, new_tokens, **kwargs)

    run()  # warm-up
    return _profiled(model, run, repeats)


# %% [markdown]
# ## 9. The machine's own roofs, a table and two plots (given)
#
# An achieved rate means little alone: 5 GFLOP/s is excellent on one machine and poor on the
# next. `machine_rates` measures this computer's two roofs with your `latency`: the rate of one
# large float32 matrix multiply (the best numpy's BLAS does here) and the bandwidth of copying a
# large array. An operation with few FLOPs per byte (`intensity`) cannot beat `bandwidth x
# intensity` however fast the arithmetic is: that is the sloped roof. Above the knee, the flat
# roof is the matmul rate. Each operation is one point under the roofs; the distance to the roof
# is what an optimization could win.

# %% nbgrader={"grade": false, "grade_id": "report-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export profile.report
"""The machine's roofs, a table and plots of where the time goes (module 14)."""

import numpy as np


def machine_rates(size: int = 512, repeats: int = 7) -> dict[str, float]:
    """Measured float32 matmul GFLOP/s (size x size) and copy bandwidth in GB/s."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = np.empty_like(a)
    mm = latency(lambda: np.matmul(a, b, out=out), warmup=2, repeats=repeats)
    src = np.ones(8 * 2**20, dtype=np.float32)  # 32 MB, more than the caches hold
    dst = np.empty_like(src)
    copy = latency(lambda: np.copyto(dst, src), warmup=2, repeats=repeats)
    # a roof is the best the machine does, not what it usually does: the fastest repeat
    return {"matmul_gflops": 2 * size**3 / mm.times.min() / 1e9,
            "copy_gbytes": 2 * src.nbytes / copy.times.min() / 1e9}  # fmt: skip


PHASES = {"forward": "fwd", "backward": "bwd", "": ""}


def _flops(n) -> str:
    return "-" if n is None else f"{n / 1e6:,.1f}"


def operation_table(rows, rates: dict | None = None, top: int | None = None) -> str:
    """The rows as text: time, share, MFLOPs, GFLOP/s and the share of the matmul roof."""
    head = f"{'operation':<28}{'calls':>6}{'ms':>9}{'share':>7}{'MFLOP':>11}{'GFLOP/s':>9}"
    head += f"{'of roof':>8}" if rates else ""
    lines = [head, "-" * len(head)]
    for r in rows[:top] if top else rows:
        name = r.op if not r.phase else f"{r.op} {PHASES[r.phase]}"
        line = f"{name:<28}{r.calls:>6}{r.seconds * 1e3:>9.2f}{r.share:>7.1%}"
        rate = (
            f"{r.gflops:>9.2f}"
            if r.kind != "outside" and r.other_flops is not None
            else f"{'-':>9}"
        )
        line += f"{_flops(r.flops if r.other_flops is not None else None):>11}{rate}"
        if rates:
            roof = r.gflops / rates["matmul_gflops"] if r.kind != "outside" else None
            line += f"{'-':>8}" if roof is None else f"{roof:>8.1%}"
        lines.append(line)
    lines.append(f"time in matrix multiplies: {matmul_share(rows):.1%} of the wall time")
    return "\n".join(lines)


COLOURS = {"matmul": "tab:blue", "other": "tab:orange", "outside": "tab:gray"}


def plot_time(rows, title: str = "where the time goes", top: int = 12):
    """Horizontal bars of each operation's share of the wall time, matmuls in blue."""
    from matplotlib.figure import Figure  # lazily: the package itself needs numpy only

    shown = rows[:top]
    figure = Figure(figsize=(7, 0.35 * len(shown) + 1.5))
    axes = figure.subplots()
    labels = [r.op if not r.phase else f"{r.op} ({r.phase})" for r in shown][::-1]
    axes.barh(labels, [100 * r.share for r in shown][::-1],
              color=[COLOURS[r.kind] for r in shown][::-1])  # fmt: skip
    axes.set_xlabel("% of the wall time")
    axes.set_title(f"{title}: {matmul_share(rows):.0%} in matrix multiplies (blue)")
    figure.tight_layout()
    return figure


def plot_roofline(rows, rates: dict, title: str = "roofline"):
    """Each operation at (FLOPs per byte, achieved GFLOP/s) under the machine's two roofs."""
    from matplotlib.figure import Figure

    points = [r for r in rows if r.kind != "outside" and r.flops and r.seconds > 0]
    figure = Figure(figsize=(7, 5))
    axes = figure.subplots()
    peak, bandwidth = rates["matmul_gflops"], rates["copy_gbytes"]
    x = np.logspace(-2, 3, 200)
    axes.loglog(
        x, np.minimum(peak, bandwidth * x), "k-", label="roof: min(matmul rate, bandwidth x I)"
    )
    for r in points:
        axes.loglog(r.intensity, r.gflops, "o", color=COLOURS[r.kind])
        axes.annotate(f"{r.op} {PHASES[r.phase]}", (r.intensity, r.gflops), fontsize=7)
    axes.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
    axes.set_ylabel("achieved GFLOP/s")
    axes.set_title(title)
    axes.legend(loc="lower right")
    figure.tight_layout()
    return figure


# %% [markdown]
# ## 10. The GPT you trained
#
# The cells below profile the GPT of `tito milestone run gpt` when its run folder exists
# (`runs/gpt`, or `runs/gpt-quick` from `--quick`, found from this folder upwards), and a small
# freshly built GPT otherwise. The numbers are this machine's: run them again after module 18 and
# compare.
#
# One condition matters more than any other on a shared machine: **threads**. numpy's BLAS
# starts one thread per core for every multiply; when other programs already keep the cores
# busy, those threads wait for each other, and a small multiply can take ten times longer than
# on one thread. The milestone therefore trains with one BLAS thread per process
# (`threadpoolctl`), and so do the measurements below; the first cell shows the difference.

# %%
import json
from pathlib import Path

from threadpoolctl import threadpool_limits

from tinytorch.core.optimizers import AdamW
from tinytorch.core.training import load_checkpoint
from tinytorch.core.transformer import GPT, GPTConfig, count_parameters


def trained_gpt():
    """(model, batch size, where it came from): the milestone's GPT, or a fresh small one."""
    for folder in (Path.cwd(), *Path.cwd().parents):
        for run in ("runs/gpt", "runs/gpt-quick"):
            path = folder / run / "checkpoint.npz"
            if path.is_file():
                with np.load(path) as archive:
                    key = next(k for k in archive.files if k.endswith("milestone_meta"))
                    meta = json.loads(archive[key].tobytes().decode())["config"]
                fields = GPTConfig.__dataclass_fields__
                model = GPT(**{k: v for k, v in meta.items() if k in fields})
                load_checkpoint(path, model)
                return model, meta["batch_size"], str(path)
    np.random.seed(0)
    return GPT(vocab_size=96, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=64,
               tie_weights=True), 16, "a fresh GPT (no milestone run found)"  # fmt: skip


def one_thread():
    return threadpool_limits(1, user_api="blas")


gpt, batch, origin = trained_gpt()
config = gpt.config
print(f"{origin}: {count_parameters(gpt):,} parameters")
print(parameter_counts(gpt, depth=2))
data_rng = np.random.default_rng(0)
x = data_rng.integers(0, config.vocab_size, size=(batch, config.max_seq_len))
y = data_rng.integers(0, config.vocab_size, size=(batch, config.max_seq_len))


def forward_backward():
    cross_entropy(gpt(Tensor(x)), y).backward()
    gpt.zero_grad()


threads = latency(forward_backward, warmup=1, repeats=5)
with one_thread():
    single = latency(forward_backward, warmup=1, repeats=5)
print(f"one training step: {threads} with numpy's default threads, {single} with one")

# %%
with one_thread():
    rates = machine_rates()
    step = profile_step(gpt, x, y, AdamW(gpt.parameters(), lr=1e-4))
print(f"one BLAS thread: {rates['matmul_gflops']:.1f} GFLOP/s matmul, "
      f"{rates['copy_gbytes']:.1f} GB/s copy")  # fmt: skip
print(operation_table(step.rows, rates, top=14))
totals = step.profiler.totals()
counted = totals["matmul_flops"] // step.repeats
analytic = gpt_step_flops(config, batch, config.max_seq_len)
print(f"matmul FLOPs of one step: counted {counted:,}, analytic {analytic['total']:,}")
rate = (totals["matmul_flops"] + totals["other_flops"]) / step.wall_seconds / 1e9
print(f"whole step: {rate:.2f} GFLOP/s, {rate / rates['matmul_gflops']:.1%} of the matmul roof")
print(f"activations kept {step.profiler.peak_bytes / 1e6:.1f} MB; "
      f"traced peak of the step {step.traced_peak_bytes / 1e6:.1f} MB")  # fmt: skip
kept = step.profiler.kept_by_layer().items()  # over every repeat: divide by their number
print({k: f"{v / step.repeats / 1e6:.2f} MB" for k, v in list(kept)[:8]})
plot_time(step.rows, "training step")

# %%
plot_roofline(step.rows, rates, "training step")

# %%
prompt = x[:1, :8]
with one_thread():
    generation = profile_generation(gpt, prompt, new_tokens=32)
    whole = latency(lambda: gpt.generate(prompt, 32, temperature=0), warmup=1, repeats=5)
print(operation_table(generation.rows, rates, top=10))
print(f"generating 32 tokens: {whole}, {32 / whole.median:.0f} tokens/s")
plot_time(generation.rows, "generating 32 tokens")

# %% [markdown]
# What to look for. In the training step the matrix multiplies carry almost all the FLOPs, and
# most of the time, but well below the roof: the roof was measured on `512 x 512` matrices, and a
# small GPT multiplies `(B T, 64) @ (64, 64)`, too thin for the BLAS to reuse what it loads. Layer
# norm, GELU, softmax and the loss do about one FLOP per byte they move; they sit near the sloped
# roof, or above it when their arrays fit in the cache (the copy measured main memory). Their
# share of the time is far larger than their share of the FLOPs.
#
# Generation with a cache multiplies one row at a time (`(1, C) @ (C, C)`): tiny multiplies with
# no reuse of the weights, so even the matmuls sit far below the roof, and the Python between
# operations takes most of the time. With module 17 in your package, its cached attention works
# on numpy arrays directly, outside the engine's operations: the profiler cannot see it, and its
# time (with the cache's copies) lands in "(outside operations)". A profiler sees what passes
# through its hook, and nothing else. Those costs are the targets of module 18.

# %% [markdown]
# A profile also catches operations that cost far more than their FLOPs say. The rule of thumb:
# an elementwise operation should run near the copy bandwidth. One that sits a hundred times
# below its neighbours on the roofline is worth reading. A classic in numpy: a power with an
# integer exponent other than 2 goes through the general `pow` routine, where a product of the
# same numbers is a few multiplications. Measure it (GPT-2's GELU needs `x³`):

# %%
cube_input = np.random.default_rng(0).standard_normal((16, 64, 256), dtype=np.float32)
with one_thread():
    power = latency(lambda: cube_input**3, warmup=2, repeats=7)
    product = latency(lambda: cube_input * cube_input * cube_input, warmup=2, repeats=7)
print(f"x**3: {power}; x*x*x: {product}; {power.median / product.median:.0f}x")

# %% [markdown]
# ## Try it

# %%
np.random.seed(0)
small = GPT(vocab_size=20, embed_dim=16, num_layers=1, num_heads=2, max_seq_len=8)
probe = Profiler(small)
with listen(probe):
    cross_entropy(small(np.zeros((2, 8), dtype=int)), np.zeros((2, 8), dtype=int)).backward()
print(probe.totals(), gpt_step_flops(small.config, 2, 8)["total"])

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs your code on seeded random inputs, asserts what
# must hold, and returns counts (never timings) for the grader to compare with the reference's.

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


def _profiled_step(model, tokens):
    profiler = Profiler(model)
    with listen(profiler):
        loss = cross_entropy(model(tokens), tokens)
        loss.backward()
    return profiler, loss


# %% nbgrader={"grade": true, "grade_id": "test-parameters", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0)
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
@graded(rtol=0, atol=0)
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
@graded(rtol=0, atol=0)
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
@graded(rtol=0, atol=0)
def test_gpt_step_flops_match_the_analytic_count(rng):
    model = _random_gpt(rng, tie=bool(rng.integers(2)))
    batch, steps = int(rng.integers(1, 4)), int(rng.integers(2, 9))
    tokens = rng.integers(0, model.vocab_size, size=(batch, steps))
    profiler, _ = _profiled_step(model, tokens)
    totals = profiler.totals()
    analytic = gpt_step_flops(model.config, batch, steps)
    assert totals["matmul_flops"] == analytic["total"]
    forward = sum(e.matmul_flops for e in profiler.events if e.phase == "forward")
    assert 3 * forward == totals["matmul_flops"]
    return {"counted": totals["matmul_flops"], "other": totals["other_flops"],
            "analytic": [analytic[k] for k in ("matmul_parameters", "parameter_term", "attention_term")]}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-memory", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0)
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
    return {"kept": kept, "layers": list(layers.values())}


# %% nbgrader={"grade": true, "grade_id": "test-latency", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12)
def test_latency_with_a_fake_clock(rng):
    steps = rng.uniform(0.5, 2.0, size=30)
    ticks = iter(np.cumsum(np.repeat(steps, 2)))  # each timed call lasts one step of the clock
    calls = []
    result = latency(lambda: calls.append(1), warmup=3, repeats=9, clock=lambda: next(ticks))
    assert len(calls) == 12 and result.times.shape == (9,)
    assert result.q1 <= result.median <= result.q3 and result.spread >= 0
    return {"times": result.times, "stats": [result.median, result.q1, result.q3]}


# %% nbgrader={"grade": true, "grade_id": "test-by-operation", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-9, atol=1e-12)
def test_rows_by_operation(rng):
    ops = ["MatMul", "Add", "LinearFunction", "Add", "MatMul"]
    events = [Event(op, phase, float(rng.uniform(0.1, 1)), int(rng.integers(100)) * (op != "Add"),
                    int(rng.integers(50)), 10, 0, "") for op in ops for phase in ("forward", "backward")]  # fmt: skip
    wall = sum(e.seconds for e in events) * 1.25
    rows = by_operation(events, wall)
    assert [r.seconds for r in rows[:-1]] == sorted((r.seconds for r in rows[:-1]), reverse=True)
    assert len(rows) == 7 and rows[-1].op == "(outside operations)"
    assert abs(sum(r.share for r in rows) - 1) < 1e-9 and abs(rows[-1].share - 0.2) < 1e-9
    rows.sort(key=lambda r: (r.op, r.phase))
    return {"calls": [r.calls for r in rows], "flops": [r.flops for r in rows],
            "share": [r.share for r in rows], "matmul": matmul_share(rows)}  # fmt: skip
