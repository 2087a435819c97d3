"""FLOP rules for the operations that are not plain matrix multiplies, and for module 18's kernels.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: module 14's `forward_flops` and
`backward_flops` count `MatMul` and `LinearFunction` themselves and read everything else here.

- `ELEMENTWISE` and `REDUCTIONS`: (forward, backward) FLOPs per output or input element of the
  operations that are not multiplies. These are conventions (an `exp` is many instructions) and
  small next to the multiplies. `FREE` operations only move data.
- `other_flops(op, in_shapes, out_shape, phase)`: the count from those tables, None for an
  operation with no rule (shown as unknown, never as free).
- `SAME_AS`: module 18's kernels that do the arithmetic of one lesson operation.
- `FUSED`: (forward rule, backward rule) of module 18's packed projection and one-node attention,
  each returning `(matmul, other)`; a backward rule takes `needed`, which gradients were computed.
  Module 21's Llama parts are in the tables (RMSNorm, rotary, SiLU), and `accelerate`'s fast
  paths for them (tinytorch/accel/llama.py) in `SAME_AS` and `FUSED`: the rotary projection of q
  and k, grouped-query attention, and SwiGLU's gate silu(a) * b.

Only shapes are read, so this file imports numpy alone.
"""

from __future__ import annotations

import math

import numpy as np

# (forward, backward) FLOPs per output element; exp, log, tanh count as one, GELU's tanh formula
# as eight forward and twelve backward. Module 21: RMSNorm squares, averages, scales by 1/rms and
# by the weight (4; backward: the weight's product and row sum, grad * weight, its dot with the
# normalised row, subtract, scale: 8; module 18's FusedRMSNorm recomputes x / rms: 9); a rotary
# output is one pair's two products and a sum (3, the inverse turn the same); SiLU is a sigmoid
# and a product (4; backward: s (1 + x (1 - s)) times the gradient, 5).
ELEMENTWISE = {"Add": (1, 0), "Sub": (1, 1), "Mul": (1, 2), "Div": (1, 4), "Neg": (1, 1),
               "Pow": (1, 3), "Exp": (1, 1), "Log": (1, 1), "ReLUFunction": (1, 1),
               "SigmoidFunction": (3, 3), "TanhFunction": (1, 3), "GELUFunction": (8, 12),
               "SoftmaxFunction": (5, 4), "LayerNormFunction": (8, 10),
               "DropoutFunction": (1, 1), "RMSNormFunction": (4, 8), "FusedRMSNorm": (4, 9),
               "RotaryFunction": (3, 3), "SiLUFunction": (4, 5)}  # fmt: skip
# (forward, backward) FLOPs per input element
REDUCTIONS = {"Sum": (1, 0), "Mean": (1, 1), "Max": (1, 2), "CrossEntropyFunction": (5, 3),
              "MSEFunction": (3, 3)}  # fmt: skip
# moving data, no arithmetic
FREE = {"Reshape", "Permute", "GetItem", "EmbeddingLookup"}
# the operations whose FLOPs are matrix multiplies (a profile's "matmul" kind)
MATMUL_OPS = ("MatMul", "LinearFunction", "QKVProjection", "FusedAttention", "RotaryProjection",
              "GroupedAttention")  # fmt: skip
# module 18's fused kernels that do the arithmetic of one lesson operation
SAME_AS = {"FusedLayerNorm": "LayerNormFunction", "FusedGELU": "GELUFunction",
           "SortedEmbeddingLookup": "EmbeddingLookup", "FusedRotary": "RotaryFunction"}  # fmt: skip
SOFTMAX = 5  # max, subtract, exp, sum, scale: per score


def shape_size(shape) -> int:
    """Number of elements of an array of this shape."""
    return math.prod(int(n) for n in shape)


def other_flops(op: str, in_shapes: list, out_shape, phase: str = "forward") -> int | None:
    """FLOPs of an operation that is not a matrix multiply; None for one the rules do not know."""
    column = 0 if phase == "forward" else 1
    if op in ELEMENTWISE:
        return ELEMENTWISE[op][column] * shape_size(out_shape)
    if op in REDUCTIONS:
        return REDUCTIONS[op][column] * shape_size(in_shapes[0])
    if op in FREE:
        return 0
    return None


def _projection(in_shapes, has_bias: bool):
    """n, rows, K, N of module 18's QKVProjection (x, W_1..W_n, b_1..b_n)."""
    n = (len(in_shapes) - 1) // 2 if has_bias else len(in_shapes) - 1
    k, m = in_shapes[1]
    return n, shape_size(in_shapes[0][:-1]), k, m


def _attention(in_shapes):
    """b, Tq, Tk, D, Dv of module 18's FusedAttention of q, k, v or one packed (3, ...) input."""
    q, k, v = in_shapes if len(in_shapes) == 3 else (tuple(in_shapes[0][1:]),) * 3
    batch = shape_size(np.broadcast_shapes(tuple(q[:-2]), tuple(k[:-2]), tuple(v[:-2])))
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


ROTARY = ELEMENTWISE["RotaryFunction"]  # per turned value, forward and backward


def _rotated(in_shapes) -> int:
    """Values the rotary projection turns: its first projection's output (rows x N)."""
    _, rows, _, m = _projection(in_shapes, False)
    return rows * m


def _rotary_projection_forward(in_shapes, kwargs):
    matmul, _ = _projection_forward(in_shapes, {})
    return matmul, ROTARY[0] * _rotated(in_shapes)


def _rotary_projection_backward(in_shapes, needed, kwargs):
    matmul, other = _projection_backward(in_shapes, needed, {})
    return matmul, other + (ROTARY[1] * _rotated(in_shapes) if any(needed) else 0)


def _grouped(in_shapes, needed=None):
    """FusedAttention's shapes and needs for grouped attention: q (B, H, T, D) as the G = H /
    H_kv heads of each kv head stacked along the rows, (B, H_kv, G*T, D); k, v (B, H_kv, T_k, D)
    apart or packed (2, ...)."""
    q = in_shapes[0]
    k, v = in_shapes[1:] if len(in_shapes) == 3 else (tuple(in_shapes[1][1:]),) * 2
    groups = q[1] // k[1]
    shapes = [(*q[:-3], k[1], groups * q[-2], q[-1]), k, v]
    if needed is None:
        return shapes
    return shapes, needed if len(needed) == 3 else [needed[0], needed[1], needed[1]]


def _grouped_forward(in_shapes, kwargs):
    return _attention_forward(_grouped(in_shapes), kwargs)


def _grouped_backward(in_shapes, needed, kwargs):
    return _attention_backward(*_grouped(in_shapes, needed), kwargs)


GATE = (5, 8)  # silu(a) * b: SiLU's 4 and the product; backward 6 for a's gradient, 2 for b's


def _gate_forward(in_shapes, kwargs):
    return 0, GATE[0] * shape_size(in_shapes[0])


def _gate_backward(in_shapes, needed, kwargs):
    return 0, (6 * needed[0] + 2 * needed[1]) * shape_size(in_shapes[0])


# module 18's fused kernels and accelerate's for module 21: (forward rule, backward rule)
FUSED = {"QKVProjection": (_projection_forward, _projection_backward),
         "FusedAttention": (_attention_forward, _attention_backward),
         "RotaryProjection": (_rotary_projection_forward, _rotary_projection_backward),
         "GroupedAttention": (_grouped_forward, _grouped_backward),
         "SwiGLUGate": (_gate_forward, _gate_backward)}  # fmt: skip


__all__ = ["ELEMENTWISE", "REDUCTIONS", "FREE", "MATMUL_OPS", "SAME_AS", "SOFTMAX", "FUSED",
           "shape_size", "other_flops"]  # fmt: skip
