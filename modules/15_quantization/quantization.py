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
# # Module 15 — Quantization: integer weights
#
# A trained GPT stores every weight as a float32: four bytes for a number that the network only
# needs to about two decimal places. Quantization stores each weight as a small integer `q` and
# keeps one float, the **scale**, per tensor or per output channel:
#
#     x  ~  scale * (q - zero_point),      q an int8 in [-128, 127] (or an int4 in [-8, 7])
#
# int8 takes a quarter of float32's bytes, int4 an eighth. What it costs is rounding: every
# weight moves by up to half a scale. Whether the model notices is an empirical question, and the
# answer is measured on the GPT of `tito milestone run gpt`, in bits per character.
#
# You will build:
#
# 1. **Scales and zero points** from a tensor's range: symmetric (zero point 0, the range
#    balanced around zero) and asymmetric (the range `[min, max]` mapped onto all codes), for the
#    whole tensor or per channel.
# 2. **`quantize` and `dequantize`**, and the error bound they promise: half a scale.
# 3. **Calibration**: the range of each layer's *input* on sample batches, read through the
#    engine's listener hook, for quantizing activations.
# 4. **`QuantizedLinear`**: module 03's `Linear` with int8 (or packed int4) weights and scales,
#    and **`quantize_model`**, which swaps every `Linear` (and embedding table) of a GPT.
# 5. **`model_bytes`**: what the model really holds, measured from its arrays.
#
# Finally the honest part: what numpy can and cannot make faster with integers.

# %%
#| default_exp compress.quantization

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
"""Integer weights: int8/int4 quantization per tensor or per channel, calibration (module 15)."""

from __future__ import annotations

import copy

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.embeddings import Embedding
from tinytorch.core.hooks import Listener, listen
from tinytorch.core.layers import Linear, LinearFunction, Module
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.text.embeddings import token_ids_array


def _bits(bits) -> int:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 2 <= bits <= 8:
        raise ValueError(f"bits must be a whole number from 2 to 8 (8 = int8), got {bits!r}")
    return int(bits)


def qrange(bits: int = 8, symmetric: bool = True) -> tuple[int, int]:
    """The codes a signed `bits`-bit integer may take; symmetric drops the lowest, -2^(b-1)."""
    top = 2 ** (_bits(bits) - 1) - 1
    return (-top if symmetric else -top - 1), top


def _finite(x, name: str = "x") -> np.ndarray:
    x = np.asarray(getattr(x, "data", x))
    if x.dtype.kind not in "iuf" or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(
            f"quantization needs a non-empty array of finite numbers for {name}, got dtype "
            f"{x.dtype} and shape {x.shape}"
        )
    return x


def _axes(x: np.ndarray, axis) -> tuple[int, ...] | None:
    """The axes a range is taken over: all of them (per tensor), or all but `axis` (per channel)."""
    if axis is None:
        return None
    if not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise ValueError(
            f"axis must name one of the {x.ndim} axes of an array of shape {x.shape} (or be None "
            f"for one scale per tensor), got {axis!r}"
        )
    return tuple(a for a in range(x.ndim) if a != axis % x.ndim)


# %% [markdown]
# ## 1. Scales and zero points
#
# A code `q` stands for `scale * (q - zero_point)`. Two ways to choose them from the values'
# range `[lo, hi]` (widened to contain 0, so that a zero weight or a zero bias is coded exactly):
#
# - **symmetric**: `zero_point = 0`, `scale = max(|lo|, |hi|) / qmax` with codes in
#   `[-qmax, qmax]` (for int8: `[-127, 127]`). Simple arithmetic; wastes codes when the values
#   are lopsided.
# - **asymmetric** (affine): every code in `[qmin, qmax]` is used, `scale = (hi - lo) / (qmax -
#   qmin)`, and the zero point is the code of 0: `zero_point = qmin - round(lo / scale)`.
#
# `axis=None` takes one range over the whole tensor. `axis=k` keeps one scale per index along
# axis `k`, taking the range over all other axes: a `Linear` weight `(in, out)` quantized with
# `axis=1` has one scale per **output channel**. One large weight then spoils only its own
# column's resolution, not every column's.
#
# Return `(scale, zero_point)` as float arrays with `keepdims=True`, so they broadcast against
# `x`. A range that is all zeros has no natural scale: use 1 (every value is coded exactly).


# %% nbgrader={"grade": false, "grade_id": "params", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def quant_params(x, bits: int = 8, symmetric: bool = True, axis=None):
    """(scale, zero_point) that code `x` in `bits` bits, per tensor or per index along `axis`."""
    x = _finite(x)
    qmin, qmax = qrange(bits, symmetric)
    axes = _axes(x, axis)
    ### BEGIN SOLUTION
    lo = np.minimum(x.min(axis=axes, keepdims=True), 0).astype(np.float64)
    hi = np.maximum(x.max(axis=axes, keepdims=True), 0).astype(np.float64)
    if symmetric:
        scale = np.maximum(-lo, hi) / qmax
    else:
        scale = (hi - lo) / (qmax - qmin)
    scale = np.where(scale == 0, 1.0, scale)  # all zeros: any scale codes them exactly
    zero = np.zeros_like(scale) if symmetric else np.clip(qmin - np.round(lo / scale), qmin, qmax)
    ### END SOLUTION
    return scale, zero


# %% [markdown]
# ## 2. Quantize and dequantize
#
#     quantize:    q = clip(round(x / scale) + zero_point, -2^(b-1), 2^(b-1) - 1)   as int8
#     dequantize:  x' = scale * (q - zero_point)                                     as float32
#
# `np.round` rounds halves to even, as PyTorch's `quantize_per_tensor` does. For a value inside
# the range the scale was made for, the error `|x - x'|` is at most `scale / 2`; a value outside
# it (an activation larger than any seen in calibration) is **clipped** and its error is
# unbounded. Dequantizing and quantizing again gives the same codes: the round trip is exact.
# Codes of any width up to 8 bits live in int8 arrays; section 4 packs int4 two to a byte.


# %% nbgrader={"grade": false, "grade_id": "quantize", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def quantize(x, scale, zero_point, bits: int = 8) -> np.ndarray:
    """int8 codes of `x` (any width up to 8 bits) for this scale and zero point."""
    x = _finite(x)
    low, high = -(2 ** (_bits(bits) - 1)), 2 ** (bits - 1) - 1
    ### BEGIN SOLUTION
    q = np.round(x / scale) + zero_point
    return np.clip(q, low, high).astype(np.int8)
    ### END SOLUTION


def dequantize(q, scale, zero_point) -> np.ndarray:
    """The float32 values the codes `q` stand for: scale * (q - zero_point)."""
    ### BEGIN SOLUTION
    return (scale * (np.asarray(q, dtype=np.float64) - zero_point)).astype(np.float32)
    ### END SOLUTION


def fake_quantize(x, bits: int = 8, symmetric: bool = True, axis=None) -> np.ndarray:
    """`x` after a trip through `bits`-bit codes: the values a quantized model computes with."""
    scale, zero = quant_params(x, bits, symmetric, axis)
    return dequantize(quantize(x, scale, zero, bits), scale, zero)


# %% [markdown]
# ## 3. Calibration: the range of what flows in
#
# A weight's range is known once training ends. An **activation**, the input of a layer, depends
# on the text: its range has to be estimated by running the model on a few sample batches and
# recording the smallest and largest value each layer's input takes. That is calibration.
#
# `RangeObserver.observe(x)` widens its running `[low, high]` to include `x`; `params(...)` turns
# the range into a scale and zero point (asymmetric is the usual choice for activations: after a
# LayerNorm or a GELU they are rarely balanced around zero).
#
# `calibrate(model, batches)` runs the model on each batch and gives one observer per `Linear`,
# by name. It does not change a class or wrap a method: it listens. Every operation the engine
# runs tells the active listeners its input arrays (`tinytorch.core.hooks`, the hook module 14's
# profiler uses too). An operation that reads a `Linear`'s weight array, module 03's
# `LinearFunction` or module 12's fused q/k/v projection, has that layer's input as its first
# array.


# %% nbgrader={"grade": false, "grade_id": "observer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class RangeObserver:
    """The running [low, high] of every value observed, over any number of batches."""

    def __init__(self):
        self.low, self.high, self.count = np.inf, -np.inf, 0

    def observe(self, x) -> None:
        x = _finite(x)
        ### BEGIN SOLUTION
        self.low = min(self.low, float(x.min()))
        self.high = max(self.high, float(x.max()))
        self.count += 1
        ### END SOLUTION

    def params(self, bits: int = 8, symmetric: bool = False):
        """Per-tensor (scale, zero_point) for the observed range."""
        if self.count == 0:
            raise ValueError("RangeObserver has seen nothing; run calibrate() on sample batches")
        return quant_params(np.array([self.low, self.high]), bits, symmetric)


class _InputRanges(Listener):
    """Feeds each Linear's observer with the input of every operation that reads its weight."""

    def __init__(self, weights: dict[int, RangeObserver]):
        self.weights = weights

    def forward(self, fn, inputs, kwargs, output, seconds):
        for array in inputs[1:]:
            observer = self.weights.get(id(array))
            if observer is not None:
                observer.observe(inputs[0])


def calibrate(model: Module, batches) -> dict[str, RangeObserver]:
    """{name of each Linear: the range of its inputs} over `model(batch)` for each batch."""
    linears = {name: m for name, m in named_modules(model) if isinstance(m, Linear)}
    observers = {name: RangeObserver() for name in linears}
    by_weight = {id(m.weight.data): observers[name] for name, m in linears.items()}
    with no_grad(), listen(_InputRanges(by_weight)):
        for batch in batches:
            model(batch)
    return observers


def named_modules(model: Module, prefix: str = ""):
    """(dotted name, module) for `model` and every module below it, each once."""
    seen: set[int] = set()

    def walk(module, name):
        if id(module) in seen:
            return
        seen.add(id(module))
        yield name, module
        for child, value in module.children():
            if isinstance(value, Module):
                yield from walk(value, f"{name}.{child}" if name else child)

    yield from walk(model, prefix)


# %% [markdown]
# ## 4. A quantized Linear
#
# `QuantizedLinear.from_linear(linear, bits, per_channel, symmetric)` keeps:
#
# - `qweight`: the codes of `linear.weight` `(in, out)`, int8; with 4 bits or fewer, two codes
#   are packed into each byte (`pack_nibbles`, given), so int4 really takes half the bytes;
# - `scale`, `zero_point`: one per output channel `(1, out)` with `per_channel`, else `(1, 1)`,
#   as float32 and int8: the bytes of the codes dominate, not these;
# - `bias` as float32: `out` numbers, not worth the rounding.
#
# `weight` gives the dequantized float32 matrix. The forward dequantizes and runs module 03's
# `LinearFunction`: the arithmetic is float32, only the storage is integer (section 6 says why).
# Module 12's attention reads `q_proj.weight` directly for its fused q/k/v product, so the
# property makes a `QuantizedLinear` fit there too. With an `input_range` from calibration the
# forward also rounds its input to int8 codes (static activation quantization); the fused q/k/v
# product never calls the forward, so the attention's input stays float32 (out_proj's, the MLP's
# and an untied head's are rounded).


# %% nbgrader={"grade": false, "grade_id": "packing", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def pack_nibbles(q: np.ndarray) -> np.ndarray:
    """Codes in [-8, 7] (int8, any shape) two to a byte, flattened: uint8 of ceil(n / 2)."""
    low4 = (q.reshape(-1).astype(np.int16) & 0xF).astype(np.uint8)
    if low4.size % 2:
        low4 = np.append(low4, np.uint8(0))
    return low4[0::2] | (low4[1::2] << 4)


def unpack_nibbles(packed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The int8 codes of `pack_nibbles`, in `shape`."""
    both = np.empty(2 * packed.size, dtype=np.int16)
    both[0::2], both[1::2] = packed & 0xF, packed >> 4
    both = np.where(both > 7, both - 16, both)  # two's complement of four bits
    return both[: int(np.prod(shape))].astype(np.int8).reshape(shape)


# %% nbgrader={"grade": false, "grade_id": "qlinear", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class QuantizedLinear(Module):
    """y = x @ dequantized(weight) + bias; the weight is stored as int8 (or int4) codes."""

    def __init__(self, qweight, scale, zero_point, bias, bits: int, shape: tuple[int, int],
                 input_params=None):  # fmt: skip
        self.bits, self.shape = _bits(bits), tuple(shape)
        self.in_features, self.out_features = self.shape
        self.qweight = pack_nibbles(qweight) if self.bits <= 4 else qweight.astype(np.int8)
        self.scale = np.asarray(scale, dtype=np.float32)
        self.zero_point = np.asarray(zero_point).astype(np.int8)
        self.bias = None if bias is None else Tensor(np.array(bias, dtype=np.float32))
        self.input_params = input_params  # (scale, zero_point) of the input, or None

    @classmethod
    def from_linear(cls, linear: Linear, bits: int = 8, per_channel: bool = True,
                    symmetric: bool = True, input_range: RangeObserver | None = None):  # fmt: skip
        """Quantize a trained Linear; `input_range` (from calibrate) also quantizes its input."""
        if not isinstance(linear, Linear):
            raise TypeError(f"from_linear needs a Linear, got {type(linear).__name__}")
        w = linear.weight.data  # (in, out)
        ### BEGIN SOLUTION
        scale, zero = quant_params(w, bits, symmetric, axis=1 if per_channel else None)
        codes = quantize(w, scale, zero, bits)
        ### END SOLUTION
        bias = None if linear.bias is None else linear.bias.data
        inputs = None if input_range is None else input_range.params(8, symmetric=False)
        return cls(codes, scale, zero, bias, bits, w.shape, inputs)

    def codes(self) -> np.ndarray:
        """The weight's integer codes (in, out), unpacked."""
        if self.bits <= 4:
            return unpack_nibbles(self.qweight, self.shape)
        return self.qweight

    @property
    def weight(self) -> Tensor:
        """The dequantized weight (in, out), float32: what the layer computes with."""
        ### BEGIN SOLUTION
        return Tensor(dequantize(self.codes(), self.scale, self.zero_point))
        ### END SOLUTION

    def forward(self, x) -> Tensor:
        x = x if isinstance(x, Tensor) else Tensor(x)
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise ShapeError(
                f"QuantizedLinear({self.in_features}, {self.out_features}) got input of shape "
                f"{x.shape}; its last axis must be {self.in_features}"
            )
        if self.input_params is not None:  # static activation quantization
            scale, zero = self.input_params
            x = Tensor(dequantize(quantize(x.data, scale, zero), scale, zero).astype(x.dtype))
        bias = () if self.bias is None else (self.bias,)
        return LinearFunction.apply(x, self.weight, *bias)  # module 03's product, dequantized

    @property
    def nbytes(self) -> int:
        """Bytes this layer stores: codes, scales, zero points and bias."""
        bias = 0 if self.bias is None else self.bias.data.nbytes
        return self.qweight.nbytes + self.scale.nbytes + self.zero_point.nbytes + bias

    def __repr__(self):
        return (
            f"QuantizedLinear(in_features={self.in_features}, out_features={self.out_features}, "
            f"bits={self.bits}, scales={self.scale.size})"
        )


# %% [markdown]
# ## 5. A whole GPT, and its bytes
#
# `quantize_model(model, ...)` copies the model (the original stays as it was, to compare) and
# replaces every `Linear` below it, in attributes, lists and dicts, with a `QuantizedLinear`
# (`swap_modules`, given). With `embeddings=True` it also replaces module 11's `Embedding`s by a
# `QuantizedEmbedding` (given): one scale per row, that is per token (or per position), which is
# also one scale per output channel of the tied output projection, since every preset of the
# course reads its logits through `token_embedding.weight`. LayerNorms and biases stay float32:
# they are few, and a LayerNorm's gain multiplies every value that passes.
#
# `model_bytes(model)` measures what a model stores: the bytes of every `Tensor` in its tree
# (parameters and anything else it keeps, each array once, so a tied matrix counts once) plus
# what each quantized layer keeps in its integer codes, scales and zero points.


# %% nbgrader={"grade": false, "grade_id": "swap", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def swap_modules(module: Module, kind: type, make) -> int:
    """Replace every `kind` below `module` by `make(name, old)`, in place; returns how many."""
    swapped = 0
    for name, owner in list(named_modules(module)):
        for key, value in list(vars(owner).items()):
            if isinstance(value, kind):
                setattr(owner, key, make(f"{name}.{key}" if name else key, value))
                swapped += 1
            elif isinstance(value, (list, dict)):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                for index, item in list(items):
                    if isinstance(item, kind):
                        value[index] = make(f"{name}.{key}.{index}".lstrip("."), item)
                        swapped += 1
    return swapped


class QuantizedEmbedding(Module):
    """Module 11's Embedding with integer rows: one scale per row with `per_channel`."""

    def __init__(self, embedding: Embedding, bits: int = 8, per_channel: bool = True,
                 symmetric: bool = True):  # fmt: skip
        w = embedding.weight.data  # (vocab_size, embed_dim)
        self.bits, self.shape = _bits(bits), w.shape
        self.num_embeddings, self.embedding_dim = w.shape
        scale, zero = quant_params(w, bits, symmetric, axis=0 if per_channel else None)
        codes = quantize(w, scale, zero, bits)
        self.qweight = pack_nibbles(codes) if self.bits <= 4 else codes
        self.scale = scale.astype(np.float32)
        self.zero_point = zero.astype(np.int8)

    def codes(self) -> np.ndarray:
        if self.bits <= 4:
            return unpack_nibbles(self.qweight, self.shape)
        return self.qweight

    @property
    def weight(self) -> Tensor:
        """The dequantized table (vocab_size, embed_dim), float32; the tied output reads it."""
        return Tensor(dequantize(self.codes(), self.scale, self.zero_point))

    def forward(self, token_ids) -> Tensor:
        ids = token_ids_array(token_ids, self.num_embeddings)
        return Tensor(self.weight.data[ids])  # (..., embed_dim)

    @property
    def nbytes(self) -> int:
        return self.qweight.nbytes + self.scale.nbytes + self.zero_point.nbytes

    def __repr__(self):
        return f"QuantizedEmbedding({self.num_embeddings}, {self.embedding_dim}, bits={self.bits})"


# %% nbgrader={"grade": false, "grade_id": "model", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def quantize_model(model: Module, bits: int = 8, per_channel: bool = True, symmetric: bool = True,
                   calibration: dict[str, RangeObserver] | None = None,
                   embeddings: bool = True) -> Module:  # fmt: skip
    """A copy of `model` with its Linears (and Embeddings) quantized; calibration: calibrate()."""
    _bits(bits)
    quantized = copy.deepcopy(model)
    ### BEGIN SOLUTION

    def make(name, linear):
        observed = None if calibration is None else calibration.get(name)
        return QuantizedLinear.from_linear(linear, bits, per_channel, symmetric, observed)

    swap_modules(quantized, Linear, make)
    if embeddings:
        swap_modules(quantized, Embedding,
                     lambda name, e: QuantizedEmbedding(e, bits, per_channel, symmetric))  # fmt: skip
    ### END SOLUTION
    return quantized


def model_bytes(model: Module) -> int:
    """Measured bytes of what `model` stores: every Tensor once, plus quantized codes and scales."""
    seen: set[int] = set()
    total = 0
    ### BEGIN SOLUTION
    for _, module in named_modules(model):
        for _, value in module.children():
            if isinstance(value, Tensor) and id(value.data) not in seen:
                seen.add(id(value.data))
                total += value.data.nbytes
        if isinstance(module, (QuantizedLinear, QuantizedEmbedding)):
            total += module.qweight.nbytes + module.scale.nbytes + module.zero_point.nbytes
    ### END SOLUTION
    return total


# %% [markdown]
# ## 6. What numpy can and cannot speed up
#
# Integer arithmetic is cheaper than float arithmetic in hardware: an int8 multiply-add takes a
# fraction of a float32 one's energy and silicon, and CPUs with VNNI or AMX do four times as many
# per instruction. PyTorch reaches that through fbgemm and oneDNN kernels. numpy does not:
# `a @ b` on float32 arrays calls BLAS (OpenBLAS or MKL, blocked and vectorised), while on
# integer arrays numpy falls back to its own plain loop. And int8 products overflow int8, so the
# codes must be widened to int32 first, which is exactly integer GEMM's accumulator width
# (`int8_matmul`, given: exact, no rounding at all until the scales are applied).
#
# The measurement below compares, for one layer of the milestone's size:
#
# 1. the float32 product (BLAS),
# 2. the int8 codes widened to int32 and multiplied (numpy's integer loop),
# 3. the dequantize-then-float32 product that `QuantizedLinear` runs.


# %% nbgrader={"grade": false, "grade_id": "int-matmul", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def int8_matmul(qx: np.ndarray, qw: np.ndarray) -> np.ndarray:
    """Exact int32 products of int8 codes (N, in) @ (in, out): integer GEMM's accumulator."""
    if qx.dtype != np.int8 or qw.dtype != np.int8:
        raise TypeError(f"int8_matmul multiplies int8 codes, got {qx.dtype} and {qw.dtype}")
    if qx.shape[-1] != qw.shape[0]:
        raise ShapeError(f"int8_matmul: shapes {qx.shape} and {qw.shape} do not chain")
    return qx.astype(np.int32) @ qw.astype(np.int32)


# %% tags=["demo"]
import time

from threadpoolctl import threadpool_limits


def best_of(fn, repeats=7):
    fn()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return min(times)


speed_rng = np.random.default_rng(0)
x32 = speed_rng.normal(size=(512, 128)).astype(np.float32)  # 16 windows x 32 positions
layer = Linear(128, 512)
qlayer = QuantizedLinear.from_linear(layer)
xs, xz = quant_params(x32)
qx = quantize(x32, xs, xz)
with threadpool_limits(1, user_api="blas"):  # one thread: two fight on a shared machine
    float_s = best_of(lambda: x32 @ layer.weight.data)
    int_s = best_of(lambda: int8_matmul(qx, qlayer.qweight))
    deq_s = best_of(lambda: x32 @ qlayer.weight.data)
print(f"float32 BLAS {float_s * 1e3:.3f} ms; int8->int32 numpy {int_s * 1e3:.3f} ms "
      f"({int_s / float_s:.0f}x slower); dequantize + float32 {deq_s * 1e3:.3f} ms")  # fmt: skip
print(f"weight bytes: float32 {layer.weight.data.nbytes:,}, int8 {qlayer.qweight.nbytes:,}")

# %% [markdown]
# Measured on the course machine (2 cores, OpenBLAS, one BLAS thread) for (512, 128) @ (128, 512):
# float32 BLAS 0.58 to 0.62 ms; the int8 codes widened to int32 and multiplied by numpy 83 to
# 370 ms, **140 to 600 times slower** (the integer loop suffers most from other jobs); dequantize
# then float32 0.56 to 0.68 ms, about the float32 time (dequantizing 65,536 codes is cheap next
# to the product). With two BLAS threads on a machine other jobs are using,
# the float32 product took up to 24 ms: one thread is the fair measurement here.
#
# So in numpy quantization buys **memory**, a quarter of the bytes on disk and in RAM, and never
# compute. The model in the milestone computes what a real int8 kernel computes (codes times
# scales) but with float32 arithmetic, and its tokens per second are a little *lower* than the
# float32 model's: every forward dequantizes every weight. On hardware with integer units
# (VNNI, phones, GPUs) the same codes run as integer GEMMs, and there the bytes saved also become
# time saved, because generating one token is bound by how fast the weights stream from memory.

# %% [markdown]
# ## Try it

# %%
from tinytorch.core.transformer import GPT

np.random.seed(0)
gpt = GPT(vocab_size=40, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=16)
q8 = quantize_model(gpt)
q4 = quantize_model(gpt, bits=4)
tokens = np.random.default_rng(1).integers(0, 40, size=(2, 16))
gap8 = np.abs(q8(tokens).data - gpt(tokens).data).max()
gap4 = np.abs(q4(tokens).data - gpt(tokens).data).max()
print(f"bytes {model_bytes(gpt):,} -> int8 {model_bytes(q8):,}, int4 {model_bytes(q4):,}")
print(f"largest logit change: int8 {gap8:.4f}, int4 {gap4:.4f}")

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs on a seeded generator, asserts what must hold,
# and returns the numbers a grader compares with the reference's.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from tinytorch.checks import graded
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Linear
from tinytorch.core.transformer import GPT


# %% nbgrader={"grade": true, "grade_id": "test-params", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-6, atol=1e-9, grades="params")
def test_scales_and_zero_points(rng):
    w = rng.normal(size=(6, 5)) * rng.uniform(0.1, 3, size=5)
    s_sym, z_sym = quant_params(w, 8, symmetric=True)
    assert s_sym.shape == (1, 1) and np.all(z_sym == 0)
    np.testing.assert_allclose(s_sym, np.abs(w).max() / 127, rtol=1e-6, atol=1e-9)
    s_ch, z_ch = quant_params(w, 8, symmetric=True, axis=1)  # one scale per column
    assert s_ch.shape == (1, 5)
    np.testing.assert_allclose(s_ch[0], np.abs(w).max(axis=0) / 127, rtol=1e-6, atol=1e-9)
    shifted = w + 2.0  # lopsided: asymmetric codes use the whole range
    s_a, z_a = quant_params(shifted, 8, symmetric=False, axis=1)
    np.testing.assert_allclose(
        s_a[0], (shifted.max(0) - np.minimum(shifted.min(0), 0)) / 255, rtol=1e-6, atol=1e-9
    )
    assert np.all((-128 <= z_a) & (z_a <= 127))
    s4, _ = quant_params(w, 4)
    np.testing.assert_allclose(s4, np.abs(w).max() / 7, rtol=1e-6, atol=1e-9)
    return {"sym": s_sym, "channel": s_ch, "asym": s_a, "zero": z_a, "int4": s4}


# %% nbgrader={"grade": true, "grade_id": "test-roundtrip", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=1e-6, grades="quantize")
def test_round_trip_error_is_at_most_half_a_scale(rng):
    x = rng.normal(size=(8, 4)) + rng.uniform(-1, 1)
    out = {}
    for symmetric in (True, False):
        for bits in (8, 4):
            scale, zero = quant_params(x, bits, symmetric, axis=1)
            q = quantize(x, scale, zero, bits)
            assert q.dtype == np.int8
            back = dequantize(q, scale, zero)
            assert np.all(np.abs(back - x) <= scale / 2 + 1e-6)
            np.testing.assert_array_equal(quantize(back, scale, zero, bits), q)  # exact trip
            out[f"q{bits}_{'sym' if symmetric else 'asym'}"] = q
    np.testing.assert_array_equal(quantize(np.array([-50.0, 50.0]), 0.1, 0, 8), [-128, 127])
    return out


# %% nbgrader={"grade": true, "grade_id": "test-calibrate", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="observer")
def test_calibration_records_each_linear_input(rng):
    np.random.seed(int(rng.integers(1000)))
    gpt = GPT(vocab_size=12, embed_dim=8, num_layers=1, num_heads=2, max_seq_len=6)
    batches = [rng.integers(0, 12, size=(2, 6)) for _ in range(3)]
    ranges = calibrate(gpt, batches)
    assert set(ranges) == {n for n, m in named_modules(gpt) if isinstance(m, Linear)}
    seen = []
    for batch in batches:  # the MLP's first layer reads ln2's output
        with no_grad():
            h = gpt.token_embedding(batch) + gpt.position_embedding(np.arange(6)[None])
            h = h + gpt.blocks[0].attention(gpt.blocks[0].ln1(h), gpt._create_causal_mask(6))
            seen.append(gpt.blocks[0].ln2(h).data)
    mlp_in = ranges["blocks.0.mlp.linear1"]
    assert mlp_in.count == 3
    np.testing.assert_allclose([mlp_in.low, mlp_in.high], [min(map(np.min, seen)),
                               max(map(np.max, seen))], rtol=1e-5)  # fmt: skip
    observer = RangeObserver()  # the range of every batch seen, not of the last one
    parts = rng.normal(size=(3, 5)) + np.array([[4.0], [0.0], [-4.0]])
    for part in parts:
        observer.observe(part)
    return {"low": np.array(mlp_in.low), "high": np.array(mlp_in.high),
            "observed": np.array([observer.low, observer.high, observer.count])}  # fmt: skip


# %% nbgrader={"grade": true, "grade_id": "test-qlinear", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades="qlinear")
def test_quantized_linear_stores_codes_and_computes_with_them(rng):
    np.random.seed(int(rng.integers(1000)))
    linear = Linear(16, 6)
    x = rng.normal(size=(3, 16)).astype(np.float32)
    out = {}
    for bits, per_channel in ((8, True), (8, False), (4, True)):
        q = QuantizedLinear.from_linear(linear, bits, per_channel)
        assert q.qweight.dtype in (np.int8, np.uint8) and q.scale.size == (6 if per_channel else 1)
        assert q.qweight.nbytes == (48 if bits == 4 else 96)  # 16 x 6 codes
        w = q.weight.data
        step = q.scale / 2 + 1e-7
        assert np.all(np.abs(w - linear.weight.data) <= step)
        np.testing.assert_allclose(q(x).data, x @ w + linear.bias.data, rtol=1e-4, atol=1e-5)
        out[f"y{bits}{'c' if per_channel else 't'}"] = q(x).data
    return out


# %% nbgrader={"grade": true, "grade_id": "test-model", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-4, grades="model")
def test_quantize_a_whole_gpt(rng):
    np.random.seed(int(rng.integers(1000)))
    gpt = GPT(vocab_size=16, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=8)
    before = {k: v.copy() for k, v in gpt.state_dict().items()}
    q8 = quantize_model(gpt, bits=8)
    linears = [m for _, m in named_modules(q8) if isinstance(m, (Linear, QuantizedLinear))]
    assert linears and all(isinstance(m, QuantizedLinear) for m in linears)
    assert isinstance(q8.token_embedding, QuantizedEmbedding)
    for key, value in gpt.state_dict().items():  # the original is untouched
        np.testing.assert_array_equal(value, before[key])
    layers = [m for _, m in named_modules(gpt) if isinstance(m, Linear)]
    tables = [gpt.token_embedding.weight, gpt.position_embedding.weight]
    weights = sum(m.weight.size for m in layers) + sum(t.size for t in tables)
    channels = sum(m.out_features for m in layers) + sum(len(t.data) for t in tables)
    assert model_bytes(gpt) == sum(p.data.nbytes for p in gpt.parameters())
    # each weight 4 bytes -> 1; each output channel (each embedding row) gains a float32 scale
    # and an int8 zero point
    assert model_bytes(gpt) - model_bytes(q8) == 3 * weights - 5 * channels
    tokens = rng.integers(0, 16, size=(2, 8))
    with no_grad():
        full, quant = gpt(tokens).data, q8(tokens).data
    assert np.abs(full - quant).max() < 0.05 * np.abs(full).max() + 1e-3
    return {"logits": quant, "bytes": np.array([model_bytes(gpt), model_bytes(q8)])}
