"""`accelerate(model)`: a model's layers take module 18's fast paths, its class unchanged.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it runs the kernels module 18 writes
(`tinytorch.accel.kernels`, `tinytorch.accel.optim`). For each layer it knows, `accelerate` gives
that one object a subclass of its own class whose `forward` takes the fast path
(`layer.__class__ = Accelerated`, with `Accelerated(FastAttention, MultiHeadAttention)`): the
model keeps its class, parameters and `state_dict`; `plain(model)` undoes it. Anything the fast
path does not cover (a mask that is not additive floats, a wrong shape and its message) goes to
the lesson's own `forward`. `parts` chooses what to swap (`PARTS`); `LESSONS` names the module
each part replaces, and `parts_for` keeps a student's completed lessons on their own code unless
they completed module 18 too. `recompute=True`: attention and GELU recompute their largest array
in the backward instead of keeping it; an attention layer then keeps no `last_attention` while
autograd records (under `no_grad`, for plots, it still does). The default, `recompute=None`, does
so when that array is large (`AUTO_VALUES`). Module 13's block (part "layernorm", with its
LayerNorms) writes a training residual sum into its branch's array (`FastBlock`), so the graph
keeps the sum but not the attention's or MLP's output beside it. A GPT also splits each training
batch over the cores (`tinytorch.accel.parallel.split_batch`: forked workers on Linux, threads
elsewhere; `workers=1` keeps it whole), and with module 17 in the package generates through
`tinytorch.accel.decode` (one numpy pass a token, the same tokens). With module 21 in the
package, a Llama's parts ("rmsnorm", "rotary", "swiglu", "gqa") and its batch split come from
the given `tinytorch.accel.llama` (`_later_parts`); `PARTS` stays the GPT's.
"""

import copy
import importlib
import sys
import time

import numpy as np

from tinytorch.accel import blocking
from tinytorch.accel.adamw import FastAdam, FastAdamL2, FastAdamW
from tinytorch.accel.kernels import (
    FusedAttention,
    FusedGELU,
    FusedLayerNorm,
    QKVProjection,
    SortedEmbeddingLookup,
    _gelu_tanh,
    _layernorm_rows,
)
from tinytorch.accel.parallel import (
    DataParallel,
    default_workers,
    run_threads,
    split_batch,
    unsplit,
)
from tinytorch.core.activations import GELU, Activation
from tinytorch.core.attention import MultiHeadAttention
from tinytorch.core.hooks import listeners
from tinytorch.core.layers import Linear, LinearFunction, Module
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam, AdamW, Optimizer
from tinytorch.core.tensor import Add, Function, Tensor, is_grad_enabled
from tinytorch.models.transformer import GPT, GPTConfig, TransformerBlock
from tinytorch.nn.feedforward import MLP
from tinytorch.nn.normalization import LayerNorm
from tinytorch.text.embeddings import Embedding, token_ids_array

# part -> the lesson it speeds
LESSONS = {"gelu": 2, "adamw": 6, "embedding": 11, "attention": 12, "layernorm": 13}
PARTS = tuple(LESSONS)
THIS_MODULE = 18
# recompute=None ("auto", the default): an attention layer recomputes its (B, H, T, T) weights,
# and GELU its tanh, in the backward when the array has at least this many values (1M, 4 MiB in
# float32): the medium preset's 8 MiB per layer goes, the small preset's 1-2 MiB stay kept.
# Measured (issue 39): medium's training peak 474 -> 389 MiB for about 5% more CPU a step.
AUTO_VALUES = 1 << 20


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def _float_mask(mask, scores_shape: tuple, dtype):
    """(ok, additive float mask or None); not ok sends the call to the lesson's checks."""
    if mask is None:
        return True, None
    values = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if values.dtype.kind != "f":
        return False, None
    try:
        fits = np.broadcast_shapes(values.shape, scores_shape) == tuple(scores_shape)
    except ValueError:
        fits = False
    return fits, values.astype(dtype, copy=False)


class FastAttention:
    """Module 12's MultiHeadAttention through QKVProjection and FusedAttention."""

    recompute = False

    def forward(self, query, mask=None, *, key=None, value=None):
        x = _tensor(query)
        k_in = x if key is None else _tensor(key)
        v_in = k_in if value is None else _tensor(value)
        embed = self.embed_dim
        shapes_fit = all(t.ndim == 3 and t.shape[-1] == embed for t in (x, k_in, v_in))
        shapes_fit = shapes_fit and k_in.shape[:2] == v_in.shape[:2] and k_in.shape[0] == x.shape[0]
        scores = (x.shape[0], self.num_heads, x.shape[1], k_in.shape[1]) if shapes_fit else ()
        fits, mask_values = _float_mask(mask, scores, x.dtype) if shapes_fit else (False, None)
        if not fits or (key is None and value is not None):
            return super().forward(query, mask, key=key, value=value)
        keep = self._keep_weights if getattr(self, "keep_attention", False) else None
        recompute = self.recompute
        if recompute is None:  # AUTO: recompute the weights when they are large
            recompute = x.shape[0] * self.num_heads * x.shape[1] * k_in.shape[1] >= AUTO_VALUES
        if recompute and is_grad_enabled():
            keep = None  # `last_attention` would hold the (B, H, T, T) weights recompute frees
        self.last_attention = None
        if key is None:
            qkv = self._heads(x, self.q_proj, self.k_proj, self.v_proj)  # (3, B, H, T, D)
            out = FusedAttention.apply(qkv, mask=mask_values, on_weights=keep, recompute=recompute)
        else:
            q = self._heads(x, self.q_proj)
            k, v = self._heads(k_in, self.k_proj), self._heads(v_in, self.v_proj)
            out = FusedAttention.apply(
                q, k, v, mask=mask_values, on_weights=keep, recompute=recompute
            )
        batch, _, steps, _ = out.shape
        merged = out.permute(0, 2, 1, 3).reshape(batch, steps, embed)  # (B, T, E)
        return self.out_proj(merged)

    def _heads(self, x, *projections):
        weights = [p.weight for p in projections]
        biases = [p.bias for p in projections if p.bias is not None]
        return QKVProjection.apply(
            x, *weights, *biases, num_heads=self.num_heads, has_bias=bool(biases)
        )

    def _keep_weights(self, weights) -> None:
        self.last_attention = weights


def _one_block(x: Tensor) -> bool:
    """No graph is recorded, no profiler listens (module 14 sees every node) and `x` fits in
    one of module 18's blocks: a kernel's block function can run on it directly, without the
    Function node and the blocking around it (generation: one row a token, where that machinery
    cost more than the arithmetic)."""
    return not is_grad_enabled() and x.size <= blocking.BLOCK and not listeners()


class FastLinear:
    """Module 03's Linear inside an accelerated attention layer or MLP: one block without a
    graph (module 17's generation, one row a token) runs the lesson's `LinearFunction.forward`
    itself, without the node around it; anything else is the lesson's `forward`."""

    def forward(self, x):
        x = _tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.in_features or not _one_block(x):
            return super().forward(x)  # the lesson's node, or its error message
        fn = LinearFunction()
        if self.bias is None:
            fn.needs_grad = (False, False)
            return Tensor(fn.forward(x.data, self.weight.data))
        fn.needs_grad = (False, False, False)
        return Tensor(fn.forward(x.data, self.weight.data, self.bias.data))


class FastLayerNorm:
    """Module 13's LayerNorm through FusedLayerNorm (one block without a graph: its
    `_layernorm_rows` directly)."""

    def forward(self, x):
        x = _tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.normalized_shape:
            return super().forward(x)  # the lesson's error message
        if _one_block(x):
            rows = x.data.reshape(-1, x.shape[-1])
            out, mean, rstd = np.empty_like(rows), *np.empty((2, len(rows), 1), rows.dtype)
            _layernorm_rows(rows, self.gamma.data, self.beta.data, self.eps, out, mean, rstd)
            return Tensor(out.reshape(x.shape))
        return FusedLayerNorm.apply(x, self.gamma, self.beta, eps=self.eps)


class FastGELU:
    """Module 02's GELU through FusedGELU (one block without a graph: its `_gelu_tanh`
    directly, then FusedGELU's `½ x (1 + t)` in the same order)."""

    recompute = False

    def forward(self, x):
        x = _tensor(x)
        if _one_block(x):
            out = np.empty_like(x.data)
            _gelu_tanh(x.data, out)
            np.multiply(out, 0.5, out=out)
            out += 0.5
            out *= x.data
            return Tensor(out)
        recompute = self.recompute
        if recompute is None:  # AUTO: recompute tanh when it is large
            recompute = x.size >= AUTO_VALUES
        return FusedGELU.apply(x, recompute=recompute)


class RecomputedMLP(Function):
    """Module 13's MLP, linear2(gelu(linear1(x))), as one node that keeps linear1's output only.

    The lesson's three nodes keep linear1's output (GELU's input) and GELU's output (linear2's
    input), each (B, T, 4C); this keeps the first and recomputes the second in the backward
    with module 18's FusedGELU. The products are the lesson's own `LinearFunction`s.
    """

    def forward(self, x, w1, b1, w2, b2):
        first, second = LinearFunction(), LinearFunction()
        first.needs_grad = self.needs_grad[:3]
        second.needs_grad = (True, *self.needs_grad[3:])
        hidden = first.forward(x, w1, b1)  # (B, T, 4C), kept
        out = second.forward(FusedGELU().forward(hidden, recompute=True), w2, b2)
        second.rows = None  # GELU's output: recomputed in the backward
        self.first, self.second, self.hidden = first, second, hidden
        return out

    def backward(self, grad):
        gelu = FusedGELU()
        gelu.needs_grad = (True,)
        activated = gelu.forward(self.hidden, recompute=False)  # keeps tanh for its backward
        self.second.rows = activated.reshape(-1, activated.shape[-1])
        g_act, g_w2, g_b2 = self.second.backward(grad)
        self.second = activated = None
        g_x, g_w1, g_b1 = self.first.backward(gelu.backward(g_act)[0])
        self.first = self.hidden = None
        return g_x, g_w1, g_b1, g_w2, g_b2


class FastMLP:
    """Module 13's MLP through RecomputedMLP when its GELU takes the fast path, autograd
    records and `recompute` says so (None: when the hidden array is large, `AUTO_VALUES`)."""

    recompute = False

    def forward(self, x):
        x = _tensor(x)
        first, second = self.linear1, self.linear2
        fits = isinstance(self.gelu, FastGELU) and first.bias is not None
        fits = fits and second.bias is not None and x.ndim >= 1
        fits = fits and x.shape[-1] == first.weight.shape[0] and is_grad_enabled()
        recompute = self.recompute
        if fits and recompute is None:
            recompute = x.size // max(x.shape[-1], 1) * first.weight.shape[1] >= AUTO_VALUES
        if not (fits and recompute):
            return super().forward(x)
        return RecomputedMLP.apply(x, first.weight, first.bias, second.weight, second.bias)


class SumIntoBranch(Add):
    """`a + b` written into b's array: a residual sum whose branch `b` no one else holds."""

    def forward(self, a, b):
        return np.add(a, b, out=b)


def _branch_free(branch: Tensor, like: Tensor, layer: Module) -> bool:
    """Whether a residual sum may write into `branch`'s array, which no one else can see: the
    lesson's attention or MLP (`layer`, no forward of its own) made it with a Linear or the MLP
    node (neither keeps its output for the backward); no profiler listens (module 14 sees each
    layer's output); CPython's counts find no other holder of the Tensor (the caller's name,
    ours, getrefcount's argument) or of its array (the attribute, our name, the argument; a
    base, by its view and the argument); it has the stream's shape and dtype."""
    if _lesson_class(layer) not in (MultiHeadAttention, MLP) or "forward" in vars(layer):
        return False
    data = branch.data
    if type(branch._ctx) not in (LinearFunction, RecomputedMLP) or listeners():
        return False
    if data.shape != like.shape or data.dtype != like.dtype or not data.flags.writeable:
        return False
    held = sys.getrefcount(branch) == 3 and sys.getrefcount(data) == 3
    return held and (data.base is None or sys.getrefcount(data.base) == 2)


class FastBlock:
    """Module 13's pre-norm TransformerBlock whose training residual sums write into the
    sublayer's output array (`SumIntoBranch`): the graph holds each sum, but not the branch
    before it (the lesson's `x + branch` keeps both, as the Add node's inputs: two (B, T, C)
    arrays a layer, 12 of a medium half-batch's 87 MiB). The values are the lesson's."""

    def forward(self, x, mask=None):
        x = _tensor(x)
        if not self.norm_first or not is_grad_enabled():
            return super().forward(x, mask)
        x = _residual(x, self.attention(self.ln1(x), mask), self.attention)
        return _residual(x, self.mlp(self.ln2(x)), self.mlp)


def _residual(x: Tensor, branch: Tensor, layer: Module) -> Tensor:
    return SumIntoBranch.apply(x, branch) if _branch_free(branch, x, layer) else x + branch


class FastEmbedding:
    """Module 11's Embedding through SortedEmbeddingLookup."""

    def forward(self, token_ids):
        ids = token_ids_array(token_ids, self.num_embeddings)  # the lesson's checks
        return SortedEmbeddingLookup.apply(self.weight, ids=ids)


_MADE: dict = {}  # (fast, original class) -> the accelerated subclass, made once


def _swap(obj, fast: type) -> None:
    """Give `obj` a subclass of its own class with `fast`'s methods first."""
    cls = _lesson_class(obj)  # already accelerated: its own class
    made = _MADE.get((fast, cls))
    if made is None:
        names = {"accelerated_by": fast, "lesson_class": cls, "__reduce_ex__": _reduce_swapped}
        made = type(cls.__name__, (fast, cls), names)
        made.__module__, made.__qualname__ = cls.__module__, cls.__qualname__
        _MADE[(fast, cls)] = made
    obj.__class__ = made


def _reduce_swapped(obj, protocol):
    """Pickle (and copy) an accelerated object as its own class, its state and the fast path:
    the made subclass has no importable name of its own."""
    cls = type(obj)
    return _swapped, (cls.lesson_class, cls.accelerated_by), obj.__dict__


def _swapped(cls: type, fast: type):
    """An empty object of `cls` swapped to `fast` (pickle then restores its state)."""
    obj = cls.__new__(cls)
    _swap(obj, fast)
    return obj


def _lesson_class(obj) -> type:
    return getattr(type(obj), "lesson_class", type(obj))


def _swap_linears(layer: Module, names: tuple[str, ...]) -> None:
    """The lesson's Linear layers `names` of `layer` take FastLinear's path without a graph."""
    for name in names:
        linear = getattr(layer, name, None)
        if _lesson_class(linear) is Linear:
            _swap(linear, FastLinear)


def _layers(model: Module):
    """Every module of `model` and the activations they hold (directly or in a list)."""
    for module in model.modules():
        yield module
        for value in vars(module).values():
            items = value if isinstance(value, (list, tuple)) else (value,)
            yield from (v for v in items if isinstance(v, Activation))


def _later_parts():
    """The given fast paths of later modules (module 21's Llama): (FAST, its models); empty
    when the package does not hold those modules yet, or holds a module 21 they cannot import
    (a GPT's acceleration never depends on a later lesson)."""
    llama = _given_later("tinytorch.accel.llama")
    return ({}, ()) if llama is None else (llama.FAST, llama.MODELS)


def _check_parts(parts, later: dict) -> tuple:
    known = PARTS + tuple(later)
    parts = known if parts is None else tuple(parts)
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise ValueError(f"accelerate: unknown part(s) {unknown}; choose from {list(known)}")
    return parts


def accelerate(obj, parts=None, *, recompute: bool | None = None, workers: int | None = None,
               processes: bool | None = None):  # fmt: skip
    """Give a model (or an Adam/AdamW optimizer) the fast paths of `parts` (default: all).

    Returns the same object. `recompute=True`: attention and GELU recompute their largest array
    in the backward instead of keeping it (less memory, a little more time); False: they keep
    it; None (the default): they recompute it when it is large (`AUTO_VALUES`). A GPT's training
    forward also splits its batch into `workers` slices (default: one per core, at most 4;
    `workers=1`: never), so a loop of `model(x)`, `loss.backward()` uses every core: on forked
    worker processes that share the weights where the system forks (Linux), else on threads;
    `processes=False` chooses threads (`tinytorch.accel.parallel.split_batch`). With module 17
    in the package a GPT's cached `generate` runs in one numpy pass a token
    (`tinytorch.accel.decode`, `fast_generation`), while its layers stay accelerated.
    """
    later, models = _later_parts()
    parts = _check_parts(parts, later)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):  # fmt: skip
        raise ValueError(f"accelerate: workers must be an integer >= 1, got {workers!r}")
    if isinstance(obj, Optimizer):
        if "adamw" in parts and isinstance(obj, Adam):
            _swap(obj, FastAdamW if isinstance(obj, AdamW) else FastAdamL2)
            obj.workers = default_workers() if workers is None else workers
        return obj
    if not isinstance(obj, Module):
        raise TypeError(f"accelerate needs a Module or an optimizer, got {type(obj).__name__}")
    for layer in _layers(obj):
        if "attention" in parts and isinstance(layer, MultiHeadAttention):
            _swap(layer, FastAttention)
            _swap_linears(layer, ("q_proj", "k_proj", "v_proj", "out_proj"))  # generation's
        elif "layernorm" in parts and isinstance(layer, LayerNorm):
            _swap(layer, FastLayerNorm)
        elif "layernorm" in parts and _lesson_class(layer) is TransformerBlock:
            _swap(layer, FastBlock)  # module 13's too: its residual sums (subclasses: their own)
        elif "gelu" in parts and isinstance(layer, GELU):
            _swap(layer, FastGELU)
        elif "gelu" in parts and _lesson_class(layer) is MLP:
            _swap(layer, FastMLP)  # GELU's output recomputed when large (see recompute)
            _swap_linears(layer, ("linear1", "linear2"))
        elif "embedding" in parts and _lesson_class(layer) is Embedding:
            _swap(layer, FastEmbedding)  # Embedding itself: its subclasses have their own forward
        else:
            fast = [f for part, (cls, f) in later.items() if part in parts
                    and isinstance(layer, cls)]  # fmt: skip
            if not fast:
                continue
            _swap(layer, fast[0])  # a later module's layer (module 21's Llama)
        if hasattr(type(layer), "recompute"):
            layer.recompute = None if recompute is None else bool(recompute)
    if isinstance(obj, (GPT, *models)):  # its class stays: the split is one attribute of obj
        split_batch(obj, default_workers() if workers is None else workers, processes)
    # its cached generation in one numpy pass a token (no decode.py yet without module 17)
    name = "decode" if isinstance(obj, GPT) else "decode_llama" if isinstance(obj, models) else ""
    decode = _given_later(f"tinytorch.accel.{name}") if name else None
    if decode is not None:
        obj.fast_generation = decode.WholeTokenDecoder()
    return obj


def _given_later(name: str):
    """A given file that builds on a later module, or None when the package does not hold it
    (or holds a later module that it cannot import) yet."""
    try:
        return importlib.import_module(name)
    except ImportError as err:  # the file, or a name of the later module it imports, is missing
        if not (err.name or "").startswith("tinytorch."):
            raise
        return None


def plain(obj):
    """Undo `accelerate`: every layer (or the optimizer) back to its own class; returns obj."""
    found = [obj] if isinstance(obj, Optimizer) else list(_layers(obj))
    if isinstance(obj, Module):
        unsplit(obj)
        vars(obj).pop("fast_generation", None)
    for layer in found:
        if hasattr(type(layer), "lesson_class"):
            layer.__class__ = type(layer).lesson_class
            for name in ("recompute", "workers", "_thread_buffers", "_fused_buffer"):
                vars(layer).pop(name, None)
    return obj


def accelerated(obj) -> set[str]:
    """The parts of `obj` that take a fast path now."""
    fast = {FastAttention: "attention", FastLayerNorm: "layernorm", FastBlock: "layernorm",
            FastGELU: "gelu", FastMLP: "gelu", FastEmbedding: "embedding", FastAdamW: "adamw",
            FastAdamL2: "adamw"}  # fmt: skip
    fast.update({f: part for part, (_, f) in _later_parts()[0].items()})
    found = [obj] if isinstance(obj, Optimizer) else list(_layers(obj))
    by = [getattr(type(x), "accelerated_by", None) for x in found]
    return {fast[f] for f in by if f not in (None, FastLinear)}  # FastLinear: its layer's part


def parts_for(completed) -> tuple[str, ...]:
    """The parts a run may accelerate when the student completed the modules `completed`.

    A completed lesson runs the student's own code, unless the student completed this module
    too (then the fast code is theirs as well); a lesson still the reference's may take the
    reference's fast path.
    """
    done = set(completed)
    if THIS_MODULE in done:
        return PARTS
    return tuple(part for part, lesson in LESSONS.items() if lesson not in done)


def step_ms(parts, workers: int = 1, recompute: bool = False, config=None, batch: int = 8) -> float:
    """Fastest of four training steps (after one warm-up) of a fresh GPT with `parts`
    accelerated, in milliseconds; `config` defaults to a GPT small enough for a notebook."""
    if config is None:
        config = GPTConfig(vocab_size=65, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=32)
    np.random.seed(0)
    model = accelerate(GPT(**vars(config)), parts, recompute=recompute)
    opt = accelerate(AdamW(model.parameters(), lr=1e-3), parts)
    runner, times = DataParallel(model, workers), []
    x = np.random.default_rng(0).integers(0, config.vocab_size, (batch, config.max_seq_len))
    for _ in range(5):
        start = time.perf_counter()
        opt.zero_grad()
        runner.backward(cross_entropy, x, x)
        opt.step()
        times.append(time.perf_counter() - start)
    return 1000 * min(times[1:])


__all__ = ["LESSONS", "PARTS", "THIS_MODULE", "AUTO_VALUES", "FastAttention", "FastMLP", "RecomputedMLP", "FastLayerNorm",
    "FastGELU", "FastEmbedding", "FastAdam", "FastAdamW", "FastAdamL2", "accelerate", "plain",
    "accelerated", "parts_for", "step_ms"]  # fmt: skip
