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

`SplitBatch` does the same inside a user's own loop: `accelerate(gpt)` gives the model a forward
(`split_batch`) that, while autograd records, runs the batch's slices on threads and returns
their output as one node of the caller's graph, so `loss.backward()` needs nothing else.
"""

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tinytorch.core.layers import Dropout, Module
from tinytorch.core.tensor import Function, ShapeError, Tensor

_INSIDE = threading.local()  # .active: this thread runs one slice of a split batch


_POOLS: dict[int, ThreadPoolExecutor] = {}  # threads -> one pool every runner shares
_BLAS: list = []  # threadpoolctl's controller, made once (finding the BLAS libraries is slow)


def _shared_pool(threads: int) -> ThreadPoolExecutor:
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(threads, "tinytorch-dp")
    return pool


class _NoBlasControl:
    """Stands in for threadpoolctl where it is not installed (the grading sandbox shows numpy
    only): the BLAS keeps its threads, and the split works all the same."""

    def limit(self, **kwargs):
        return contextlib.nullcontext()


def _blas_controller():
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _BLAS.append(_NoBlasControl())
        else:
            _BLAS.append(ThreadpoolController())
    return _BLAS[0]


def run_threads(fn, jobs: list) -> list:
    """`fn(*job)` for every job, the first in this thread and the rest on a shared pool's
    threads, each with one BLAS thread; waits for all, re-raises the first error.

    numpy's BLAS stays at one thread afterwards: given its threads back, OpenBLAS would
    wake them, and they spin waiting for work for a while after every call, which on a busy
    machine costs more CPU than the step itself.
    """
    _blas_controller().limit(limits=1, user_api="blas")
    pool = _shared_pool(len(jobs) - 1) if len(jobs) > 1 else None
    futures = [pool.submit(fn, *job) for job in jobs[1:]]
    try:
        first = fn(*jobs[0])
    finally:
        errors = [f.exception() for f in futures]  # wait for every worker, even on error
    for err in errors:
        if err is not None:
            raise err
    return [first, *(f.result() for f in futures)]


def splitting() -> bool:
    """Whether this thread already runs one slice of a batch split over threads."""
    return getattr(_INSIDE, "active", False)


def default_workers() -> int:
    """Threads a batch is split over by default: the cores this process may use, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


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

    processes=True (None: where the system forks) runs the slices but this process's own on
    forked workers that share the weights instead (`tinytorch.accel.processes`, as
    `accelerate(gpt)` does in a user's loop): the model's output comes back whole and the loss
    is computed here, on every row at once.

    `backward(loss_fn, x, y)` leaves in every parameter's `.grad` what
    `loss_fn(model(x), y).backward()` would (up to float rounding) and returns the loss as a float.
    Each worker uses one BLAS thread while it runs. The copies the workers use are made at every
    call, so they always match the model: its weights, its layers and its settings.
    """

    def __init__(self, model: Module, workers: int = 2, processes: bool | None = False):
        if not isinstance(model, Module):
            raise TypeError(f"DataParallel needs a Module, got {type(model).__name__}")
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
            raise ValueError(f"DataParallel: workers must be an integer >= 1, got {workers!r}")
        from tinytorch.accel.processes import can_fork

        self.model, self.workers = model, int(workers)
        self.processes = processes is not False and can_fork()
        self._pool = _shared_pool(workers - 1) if workers > 1 else None

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
            for m in memo.values():  # each copy runs whole: the split is the caller's
                if isinstance(m, Module):
                    unsplit(m)
            out.append((clone, [memo[id(p)] for p in params]))
        return out

    def _one_blas_thread(self):
        return _blas_controller().limit(limits=1, user_api="blas")

    def _each(self, fn, jobs: list) -> list:
        return run_threads(fn, jobs)

    @staticmethod
    def _slice(model, loss_fn, x, y, weight: float) -> float:
        before, _INSIDE.active = splitting(), True  # an accelerated model splits no further
        try:
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward(np.full(loss.shape, weight, dtype=loss.dtype))
        finally:
            _INSIDE.active = before
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
        if self.processes:  # forked workers (tinytorch.accel.processes), the loss computed here
            out = split_forward(self.model, self, x, processes=True)
            if out is not None:
                loss = loss_fn(out, y)
                loss.backward()
                return loss.item()
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


class SplitBatch(Function):
    """`model(x)` with the rows of `x` split over threads, as one node of the caller's graph.

    `SplitBatch.apply(x, *model.parameters(), model=model, runner=DataParallel(model, n))`
    returns the whole batch's output. Each slice runs forward through a copy of the model that
    shares its weight arrays and records a graph of its own; the node's backward runs the
    slices' backwards side by side and adds, for each parameter, the sum of the copies'
    gradients to its `.grad` (as the engine adds a leaf's gradient, without the engine's copy),
    so the caller's `loss.backward()` fills `.grad` as the unsplit forward would.
    This is what `accelerate(model)` gives a GPT whose batch has rows to spare: the user's own
    loop (`loss = cross_entropy(model(x), y); loss.backward()`) uses both cores for everything,
    not only for the matrix products.
    """

    def forward(self, x, *weights, model, runner):
        n = len(x)
        params = model.parameters()
        parts = min(runner.workers, n)
        self.runner, self.copies = runner, runner._copies(params, parts)
        bounds = [round(i * n / parts) for i in range(parts + 1)]
        self.bounds = list(zip(bounds[:-1], bounds[1:]))
        slices = [x[a:b] for a, b in self.bounds]
        self.outs = runner._each(_forward_slice, [(c, s) for (c, _), s in zip(self.copies, slices)])
        return np.concatenate([o.data for o in self.outs])

    def backward(self, grad):
        jobs = [(out, grad[a:b]) for out, (a, b) in zip(self.outs, self.bounds)]
        self.runner._each(_backward_slice, jobs)
        self.outs = None
        params = self.parents[1:]
        for i, (p, needed) in enumerate(zip(params, self.needs_grad[1:])):
            found = [cloned[i].grad for _, cloned in self.copies if cloned[i].grad is not None]
            if not needed or not found:
                continue
            total = found[0]  # the first copy's own array: nobody else holds it
            for g in found[1:]:
                total += g
            if p.grad is None:  # into `.grad` directly, sparing the engine's copy of each
                p.grad = total
            else:
                p.grad += total
        self.copies = None
        return (None,) * (1 + len(params))


def _forward_slice(model, x) -> Tensor:
    before, _INSIDE.active = splitting(), True
    try:
        return model(Tensor(x))
    finally:
        _INSIDE.active = before


def _backward_slice(out: Tensor, grad: np.ndarray) -> None:
    if out.requires_grad:
        out.backward(grad)


def _split_forward(model: Module, x, *args, **kwargs):
    """The forward `split_batch` gives one model: split when it can, else the class's own (always
    with more arguments than the batch: a Llama's `forward(tokens, caches)` generating)."""
    if args or kwargs:
        return type(model).forward(model, x, *args, **kwargs)
    runner = DataParallel(model, model.split_workers)
    out = split_forward(model, runner, x, processes=model.split_processes)
    return type(model).forward(model, x) if out is None else out


class SplitForward:
    """The `forward` that `split_batch` gives one model: `_split_forward` bound to it, as an
    object that pickles (a bound method of a function the class lacks would not load)."""

    def __init__(self, model: Module):
        self.model = model

    def __call__(self, x, *args, **kwargs):
        return _split_forward(self.model, x, *args, **kwargs)


def _class_forward(model: Module, x: Tensor) -> Tensor:
    return type(model).forward(model, x)


def split_batch(model: Module, workers: int, processes: bool | None = None) -> None:
    """From now on `model(x)` splits x's rows over `workers` threads, or processes, while autograd
    records.

    processes=None (the default) uses processes where the system forks (Linux): forked workers
    that share the weights (`tinytorch.accel.processes`), forked at the first split. The model
    keeps its class: the split is an instance attribute `forward` (and `split_workers`,
    `split_processes`); the copies the threads run are given the class's forward back, and
    `unsplit(model)` removes them and stops the workers. workers=1 removes them too.
    """
    from tinytorch.accel.processes import can_fork

    unsplit(model)
    if workers < 2:
        return
    model.split_workers = int(workers)
    model.split_processes = processes is not False and can_fork()
    model.forward = SplitForward(model)


def unsplit(model: Module) -> None:
    """Undo `split_batch`: the model's forward is its class's again, its workers stopped."""
    if _is_split(model):
        del model.forward
        vars(model).pop("split_workers", None)
        vars(model).pop("split_processes", None)
        split = vars(model).pop("_process_split", None)
        if split is not None and split.owner() is model:  # a copy's unsplit leaves them running
            split.close()


def _is_split(model) -> bool:
    return isinstance(vars(model).get("forward"), SplitForward)


def split_forward(model: Module, runner: "DataParallel", x, processes: bool = False):
    """`model(x)` through SplitBatch (or, with processes, `SplitOverProcesses`) when it can help,
    else None (the caller runs it whole).

    It splits when autograd records, the batch has at least two rows, this thread is not already
    one slice of a split, and no Dropout is active (its masks would come in another order).
    """
    from tinytorch.core.tensor import is_grad_enabled

    rows = x.data if isinstance(x, Tensor) else np.asarray(x)
    if runner.workers < 2 or not is_grad_enabled() or splitting():
        return None
    if rows.ndim < 1 or len(rows) < 2:
        return None
    modules = model.modules()
    if any(isinstance(m, Dropout) and m.training and m.p > 0 for m in modules):
        return None
    params = model.parameters()
    if not any(p.requires_grad for p in params):
        return None
    if processes and len(rows) >= runner.workers:
        from tinytorch.accel.processes import ProcessSplit, SplitOverProcesses, split_of

        split = split_of(model)
        if split is None or not split.ready(params, modules):
            if split is not None:
                split.close()
            split = model._process_split = ProcessSplit(model, runner.workers, _class_forward)
        return SplitOverProcesses.apply(rows, *params, model=model, split=split, params=params)
    return SplitBatch.apply(rows, *params, model=model, runner=runner)


__all__ = ["DataParallel", "SplitBatch", "default_workers", "run_threads", "split_batch", "unsplit",
    "split_forward", "splitting"]  # fmt: skip
