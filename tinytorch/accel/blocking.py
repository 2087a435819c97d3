"""Blocks and buffers for module 18's kernels: how an array is cut into cache-sized pieces.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: module 18's kernels import
these helpers and its lesson says what each does; students write the kernels around them.

A kernel that makes several passes over an array of several MiB spends its time moving memory:
each pass reads the array from main memory again. Cut into blocks of `BLOCK` values, the passes
over one block run while it sits in the core's cache. Blocks are also the unit the two threads of
`accelerate`'s batch split hand Python's lock over at, once per numpy call, so a block is not
made smaller than the cache needs: with blocks of 64K values a small GPT's split training step
took about 2.5 ms longer (52.4 against 50.0 ms) than with 128K, and one thread alone was no faster
with 64K (72.8 against 72.3 ms; issue 39).
"""

from __future__ import annotations

import math

import numpy as np

BLOCK = 1 << 17  # values per block: 512 KiB of float32, half a core's L2 cache here


def blocks(size: int, block: int | None = None, start: int = 0) -> list[slice]:
    """Slices covering `range(start, size)`, `block` values each (default BLOCK; the last may
    be shorter)."""
    block = BLOCK if block is None else block
    return [slice(first, min(first + block, size)) for first in range(start, size, block)]


def row_blocks(rows: int, width: int) -> list[slice]:
    """Slices of `rows` rows of `width` values each, about BLOCK values a block (at least a row)."""
    return blocks(rows, max(1, BLOCK // max(width, 1)))


def block_scratch(size: int, dtype) -> np.ndarray:
    """An empty array of one block of `blocks(size)`: BLOCK values, or `size` if fewer."""
    return np.empty(min(size, BLOCK), dtype)


def heads_buffer(shape: tuple, dtype, count: int = 0) -> np.ndarray:
    """An empty (B, H, T, d) array stored in (B, T, H, d) order, so merging its heads into
    (B, T, H·d) is a reshape without a copy; `count` > 0 makes `count` of them as one
    (count, B, H, T, d) array stored (B, T, count, H, d). Other ranks: a plain empty array."""
    if len(shape) != 4:
        return np.empty((count, *shape) if count else shape, dtype=dtype)
    b, h, t, d = shape
    if not count:
        return np.empty((b, t, h, d), dtype=dtype).transpose(0, 2, 1, 3)
    return np.empty((b, t, count, h, d), dtype=dtype).transpose(2, 0, 3, 1, 4)


def head_blocks(shape: tuple) -> list[slice]:
    """Slices of the first axis of (..., Tq, Tk) scores, about BLOCK values each (at least one
    row); one slice taking everything for two-dimensional scores."""
    if len(shape) < 3:
        return [slice(None)]
    return blocks(shape[0], max(1, BLOCK // math.prod(shape[1:])))


def batch_part(a, part: slice, ndim: int):
    """Block `part` of an array that broadcasts against ndim-dimensional scores (None stays
    None; an array without that batch axis is the same for every block)."""
    if a is None or a.ndim < ndim or a.shape[0] == 1:
        return a
    return a[part]


def mean_last(a: np.ndarray) -> np.ndarray:
    """Mean over the last axis, kept as a length-1 axis: (..., C) -> (..., 1), as one
    matrix-vector product (numpy's `mean` is slow over many short rows)."""
    n = a.shape[-1]
    return (a @ np.full(n, 1.0 / n, dtype=a.dtype))[..., None]


def sum_leading(a: np.ndarray) -> np.ndarray:
    """Sum over every axis but the last: (..., C) -> (C,), as one vector-matrix product."""
    rows = a.reshape(-1, a.shape[-1])
    return np.ones(len(rows), dtype=a.dtype) @ rows


__all__ = ["BLOCK", "blocks", "row_blocks", "block_scratch", "heads_buffer", "head_blocks",
    "batch_part", "mean_last", "sum_leading"]  # fmt: skip
