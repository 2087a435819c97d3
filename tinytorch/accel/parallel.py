"""Data parallelism over threads: one batch, split into slices that train side by side.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: module 18 explains what it does; the
GPT milestone and the benchmarks train through it.

numpy runs one operation at a time on one core, apart from the matrix products its BLAS spreads
over threads. A batch is many independent rows, so `DataParallel(model, workers=2)` runs forward
and backward of each slice of it in a worker thread, through a copy of the model made for that
call (new parameter Tensors over the same weight arrays, each with its own `.grad`), and sums the
gradients at the end. numpy lets go of the GIL inside its kernels, so the slices run side by side.
The sum equals the whole batch's gradient because the loss is a mean: slice `i` of `n_i` rows
starts its backward from `n_i / N`. Dropout draws from numpy's global generator in an order
threads would change, so a model with active dropout is refused.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tinytorch.core.layers import Dropout, Module
from tinytorch.core.tensor import ShapeError, Tensor


def _rows(a):
    """The array whose first axis is the batch (a Tensor's data, or the array itself)."""
    return a.data if isinstance(a, Tensor) else np.asarray(a)


def _take(a, start: int, stop: int):
    """Rows start:stop of `a`, as the same kind of object (Tensor or array)."""
    return Tensor(a.data[start:stop]) if isinstance(a, Tensor) else np.asarray(a)[start:stop]


def _copy_sharing(obj, memo: dict):
    """A copy of a model whose parameters are new Tensors over the same arrays, with no grad.

    Modules are copied one level deep (their attributes are shared, apart from the Tensors,
    Modules and containers below them, copied the same way); activations, settings and arrays are
    the model's own objects, so the copy behaves as the model does at the moment it is made.
    """
    if id(obj) in memo:  # a tied weight or a module used twice stays shared in the copy
        return memo[id(obj)]
    if isinstance(obj, (Tensor, Module)):
        clone = object.__new__(type(obj))
        memo[id(obj)] = clone
        if isinstance(obj, Tensor):
            clone.__dict__.update(obj.__dict__, _grad=None)
        else:
            clone.__dict__.update({k: _copy_sharing(v, memo) for k, v in vars(obj).items()})
        return clone
    if type(obj) in (list, tuple):
        return type(obj)(_copy_sharing(v, memo) for v in obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return type(obj)(*(_copy_sharing(v, memo) for v in obj))
    if type(obj) is dict:
        return {k: _copy_sharing(v, memo) for k, v in obj.items()}
    return obj


class DataParallel:
    """Forward and backward of a batch split over `workers` threads, gradients summed.

    `backward(loss_fn, x, y)` leaves in every parameter's `.grad` what
    `loss_fn(model(x), y).backward()` would (up to float rounding) and returns the loss as a float.
    Each worker uses one BLAS thread while it runs. The copies the workers use are made at every
    call, so they always match the model: its weights, its layers and its settings.
    """

    def __init__(self, model: Module, workers: int = 2):
        if not isinstance(model, Module):
            raise TypeError(f"DataParallel needs a Module, got {type(model).__name__}")
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
            raise ValueError(f"DataParallel: workers must be an integer >= 1, got {workers!r}")
        self.model, self.workers = model, int(workers)
        self._pool = ThreadPoolExecutor(workers - 1, "tinytorch-dp") if workers > 1 else None
        self._blas = None

    def _copies(self, params: list[Tensor], count: int) -> list[tuple]:
        """`count` copies of the model sharing its weight arrays: (copy, its `params`) pairs."""
        out = []
        for _ in range(count):
            memo: dict = {}
            clone = _copy_sharing(self.model, memo)
            for m in memo.values():
                if isinstance(m, Dropout) and m.training and m.p > 0:
                    raise ValueError(
                        f"DataParallel cannot split a model with active {m!r}: its masks come "
                        "from numpy's global generator in an order threads would change; use "
                        "workers=1"
                    )
            out.append((clone, [memo[id(p)] for p in params]))
        return out

    def _one_blas_thread(self):
        if self._blas is None:
            from threadpoolctl import ThreadpoolController

            self._blas = ThreadpoolController()
        return self._blas.limit(limits=1, user_api="blas")

    @staticmethod
    def _slice(model, loss_fn, x, y, weight: float) -> float:
        loss = loss_fn(model(x), y)
        loss.backward(np.full(loss.shape, weight, dtype=loss.dtype))
        return loss.item() * weight

    def backward(self, loss_fn, x, y) -> float:
        """Run `loss_fn(model(x), y)` and its backward over the workers; return the loss."""
        n, targets = len(_rows(x)), len(_rows(y))
        if targets != n:
            raise ShapeError(
                f"DataParallel: inputs have {n} rows but targets have {targets}; "
                "pass a batch whose first axis is the same for both"
            )
        parts = min(self.workers, n)
        if parts <= 1:
            return self._slice(self.model, loss_fn, x, y, 1.0)
        params = self.model.parameters()
        copies = self._copies(params, parts - 1)
        bounds = [round(i * n / parts) for i in range(parts + 1)]
        jobs = [(bounds[i], bounds[i + 1], (bounds[i + 1] - bounds[i]) / n) for i in range(parts)]
        with self._one_blas_thread():
            futures = [
                self._pool.submit(self._slice, clone, loss_fn, _take(x, a, b), _take(y, a, b), w)
                for (clone, _), (a, b, w) in zip(copies, jobs[1:])
            ]
            a, b, w = jobs[0]
            try:
                total = self._slice(self.model, loss_fn, _take(x, a, b), _take(y, a, b), w)
            finally:
                done = [f.exception() for f in futures]  # wait for every worker, even on error
        for err in done:
            if err is not None:
                raise err
        total += sum(f.result() for f in futures)
        for _, cloned in copies:
            for p, c in zip(params, cloned):
                if c.grad is None:
                    continue
                if p.grad is None:
                    p.grad = c.grad
                else:
                    p.grad += c.grad
        return total


__all__ = ["DataParallel"]  # fmt: skip
