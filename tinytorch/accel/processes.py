"""A batch split over processes: forked workers that each run one slice of it, weights shared.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: `accelerate(gpt)` uses it
for the user's own loop where the system can fork (Linux), and threads
(`tinytorch.accel.parallel`) elsewhere.

Why processes: numpy lets go of Python's lock (the GIL) inside each call and takes it back after,
so two threads that make many small numpy calls wait for each other at every call. A forked
process has a lock of its own. The weights move once, at the first split, into memory the
workers share with this process (`mmap` of no file, made before the fork), so the optimizer's
in-place update reaches every worker with no copy. Each step sends a worker its rows (a socket),
the worker runs its forward and keeps its graph, sends its output back, and, given the output's
gradient, runs its backward and writes its weights' gradients into a second shared buffer that
this process adds to its own. This process's gradients and an accelerated AdamW's moments are
shared memory too, so that optimizer's step over the flat arrays (`tinytorch.accel.adamw`) is cut
into one share per process: the workers would otherwise wait through it.

A worker runs the model as it was when it was forked. `ProcessSplit.ready` tells, before every
split, whether that still holds: the same parameters, the same modules (a layer swapped for
another forks new workers), the same modes and settings; a weight array replaced by assignment
(`p.data = ...`, as `load_state_dict` does) is copied into the shared memory instead. What it
cannot see is a change made inside an array or a container in place (a frozen tensor's values,
a dict of options): `plain(model)` then `accelerate(model)` forks afresh.
"""

from __future__ import annotations

import contextlib
import mmap
import sys
import weakref

import numpy as np

from tinytorch.accel.workers import (
    Worker,
    WorkerError,
    can_fork,
    close_all,
    memory_of,
    reached_leaves,
    recv_array,
    send_array,
)
from tinytorch.core.layers import Module
from tinytorch.core.tensor import Function, Tensor

ALIGN = 64  # bytes: each weight's view starts on a cache line


def _layout(params: list[Tensor]) -> tuple[list[int], int]:
    offsets, end = [], 0
    for p in params:
        offsets.append(end)
        end += -(-p.data.nbytes // ALIGN) * ALIGN
    return offsets, max(end, ALIGN)


def _views(buffer: mmap.mmap, params: list[Tensor], offsets: list[int]) -> list[np.ndarray]:
    return [
        np.frombuffer(buffer, dtype=p.data.dtype, count=p.data.size, offset=o).reshape(p.shape)
        for p, o in zip(params, offsets)
    ]


_SCALARS = (bool, int, float, complex, str, bytes)


def _signature(modules: list[Module]) -> tuple:
    """What a worker forked now would take from the modules besides the weights: each module
    (its class, its mode) and its settings, numbers by value, other objects by identity. Arrays,
    Tensors, modules (listed themselves) and None are left out: caches a forward sets or clears
    (an attention layer's `last_attention`) must not fork a worker again at every step."""
    out = []
    for m in modules:
        out.append((type(m), m.training))
        for key, value in vars(m).items():
            if value is None or isinstance(value, (Tensor, np.ndarray, Module, ProcessSplit)):
                continue
            out.append((key, value) if isinstance(value, _SCALARS) else (key, id(value)))
    return tuple(out)


class ProcessSplit:
    """Workers forked from this process, each running one slice of a split batch of `model`.

    `ProcessSplit(model, workers, forward)` moves the model's weights into shared memory and
    forks `workers - 1` processes, each calling `forward(model, Tensor(rows))` on its slice; this
    process runs the first slice itself. `SplitOverProcesses` is the graph node that drives them.
    """

    def __init__(self, model: Module, workers: int, forward):
        self.owner = weakref.ref(model)
        self.params = params = model.parameters()
        self.modules = model.modules()  # held, so that their ids stay theirs
        self.signature = _signature(self.modules)
        self.steps, self.dropped, self.closed = 0, [], False
        offsets, size = _layout(params)
        self.weights = mmap.mmap(-1, size)
        self.shared = _views(self.weights, params, offsets)
        dtypes = {p.data.dtype for p in params}
        self.flat_dtype = dtypes.pop() if len(dtypes) == 1 else None
        self.offsets, self.size = offsets, size
        if self.flat_dtype is not None:  # the weights as one array, and where each starts in it
            self.flat_weights = np.frombuffer(self.weights, dtype=self.flat_dtype)
            self.starts = [o // self.flat_dtype.itemsize for o in offsets]
        self.grad_views: list[np.ndarray] | None = None  # the last backward's, in one array
        _BY_WEIGHTS[id(self.weights)] = self
        for p, view in zip(params, self.shared):
            view[...] = p.data
            p.data = view
        self.workers: list[Worker] = []
        maps = [mmap.mmap(-1, size) for _ in range(workers - 1)]  # each worker's gradients
        self.grads = [_views(m, params, offsets) for m in maps]
        # made before the forks, so every process maps them: this process's gradients and an
        # optimizer's two moments (the workers update a share of the weights with them). Memory
        # no one touches costs nothing.
        self.own, self.moment_maps = mmap.mmap(-1, size), (mmap.mmap(-1, size), mmap.mmap(-1, size))
        self._own_flat, self.moments_owner, self.helped = _nothing, _nothing, 0
        self.flat = None
        if self.flat_dtype is not None:
            self.flat = {"weights": self.flat_weights, "own": self._flat(self.own),
                         "moments": [self._flat(m) for m in self.moment_maps]}  # fmt: skip
        for grads in self.grads:
            self.workers.append(Worker(model, params, grads, forward, self.flat))
        self.cpu = [0.0] * len(self.workers)
        self._finalizer = weakref.finalize(self, close_all, list(self.workers))

    def __reduce__(self):  # a copied or pickled model forks workers of its own when it trains
        return _nothing, ()

    def ready(self, params: list[Tensor], modules: list[Module]) -> bool:
        """Whether the workers still run the model whose `parameters()` and `modules()` these
        are: the same parameters, modules and settings (`_signature`). Weight arrays replaced
        since the fork are copied into the shared memory (and the Tensors pointed back)."""
        if self.closed or len(params) != len(self.params) or len(modules) != len(self.modules):
            return False
        if any(a is not b for a, b in zip(modules, self.modules)):
            return False
        if _signature(modules) != self.signature:
            return False
        if not all(worker.alive() for worker in self.workers):
            return False
        for p, q, view in zip(params, self.params, self.shared):
            if p is not q or p.shape != view.shape or p.data.dtype != view.dtype:
                return False
            if p.data is not view:
                view[...] = p.data
                p.data = view
        return True

    @contextlib.contextmanager
    def _talking(self, worker: Worker):
        """Any failure while talking to a worker (it stopped, it reported an error, or this
        process was interrupted half way, Ctrl-C) stops every worker: a conversation cut short
        cannot be resumed, and the next split forks new ones."""
        pid = worker.pid
        try:
            yield
        except (EOFError, OSError):
            self.close()
            raise WorkerError(
                f"a worker process of the batch split (pid {pid}) stopped; "
                "accelerate(model, workers=1) trains without workers"
            ) from None
        except BaseException:
            self.close()
            raise

    def _reply(self, worker: Worker, array: bool = False):
        with self._talking(worker):
            reply = worker.conn.recv()
            if isinstance(reply, tuple) and reply[0] == "error":
                raise reply[1]
            return recv_array(worker.conn, reply[1:]) if array else reply

    def _send(self, command: str, step: int, arrays: list, array: bool = True) -> None:
        """`command` to each worker with its own array (or, array=False, its own object)."""
        dropped, self.dropped = self.dropped, []
        for worker, a in zip(self.workers, arrays):
            with self._talking(worker):
                if array:
                    send_array(worker.conn, a, head=(command, step, dropped))
                else:
                    worker.conn.send((command, step, dropped, a))

    def _flat(self, memory: mmap.mmap) -> np.ndarray:
        return np.frombuffer(memory, dtype=self.flat_dtype)

    def send_forward(self, slices: list[np.ndarray]) -> int:
        """Start the workers on their slices (one each); returns the step's number."""
        self.steps += 1
        self._send("forward", self.steps, slices)
        return self.steps

    def outputs(self) -> list[np.ndarray]:
        return [self._reply(worker, array=True) for worker in self.workers]

    def send_backward(self, step: int, grads: list[np.ndarray]) -> None:
        self._send("backward", step, grads)

    def gradients(self) -> list[list[np.ndarray | None]]:
        """For each worker, its gradient of every parameter (a view of shared memory that the
        next step overwrites: add it somewhere, do not keep it), or None."""
        out = []
        for i, (worker, grads) in enumerate(zip(self.workers, self.grads)):
            _, found, self.cpu[i] = self._reply(worker)
            out.append([g if ok else None for g, ok in zip(grads, found)])
        return out

    def cpu_seconds(self) -> float:
        """The workers' CPU time (all of it since each was forked) as of their last backward."""
        return sum(self.cpu)

    def new_grads(self) -> list[np.ndarray] | None:
        """Zeroed gradient arrays for every parameter, views of one array laid out as the shared
        weights are (so `flat_split` can hand the optimizer both whole); None with mixed dtypes.

        The last step's array is zeroed and used again when nothing but this split still holds
        it or its views (every `.grad` was dropped, no one kept one): no new 4 bytes a weight,
        and no heap that grows from step to step. It is the shared one the workers can read
        (`adamw_share`) unless someone still holds that: then one of this process's."""
        if self.flat_dtype is None:
            return None
        views = self.grad_views  # the shared array's, or one of ours while someone holds that
        if views is not None and _unshared(views) and self._own_flat() is not None:
            views[0].base.fill(0)
            return views
        self.grad_views = None
        if self._own_flat() is None:  # the shared array, when no one holds it any more
            flat = self._flat(self.own)
            flat.fill(0)
            self._own_flat = weakref.ref(flat)
        else:
            flat = np.zeros(self.size // self.flat_dtype.itemsize, dtype=self.flat_dtype)
        self.grad_views = _views(flat, self.params, self.offsets)
        return self.grad_views

    def claim_moments(self, optimizer) -> list[np.ndarray] | None:
        """Two zeroed flat arrays for `optimizer`'s moments that the workers can see, or None
        when another optimizer still holds them (or the weights are of mixed dtypes)."""
        if self.flat is None or self.moments_owner() not in (None, optimizer):
            return None
        self.moments_owner = weakref.ref(optimizer)
        for whole in self.flat["moments"]:
            whole.fill(0)  # touched here, so this process's memory counts them
        return self.flat["moments"]

    def adamw_share(self, optimizer, step: int, share: list[slice], hyper: dict) -> bool:
        """Start the workers on their shares of an AdamW step over the flat arrays (weights,
        this backward's gradients, the claimed moments), while this process does `share`;
        then `adamw_done()`. False, and nothing sent, when they cannot see those arrays or one
        has stopped. A worker that stops during its share makes `adamw_done` raise WorkerError,
        its share of the weights then perhaps part updated (the step is not repeated)."""
        grads = self.grad_views[0].base if self.grad_views else None
        if grads is None or memory_of(grads) is not self.own or not self.workers:
            return False
        if self.moments_owner() is not optimizer or not all(w.alive() for w in self.workers):
            return False  # a worker gone since the backward: this process does it all
        self.helped += 1
        self._send("adamw", step, [(hyper, part) for part in share], array=False)
        return True

    def adamw_done(self) -> None:
        """Every worker's answer to `adamw_share` (with its CPU time so far)."""
        for i, worker in enumerate(self.workers):
            self.cpu[i] = self._reply(worker)[1]

    def drop(self, step: int) -> None:
        """The node of `step` is gone without a backward: the workers may free its graph."""
        self.dropped.append(step)

    def memory_kib(self) -> int:
        """The workers' private memory at its peak, in KiB (`peak_private_kib`): what they add
        to this process's."""
        total = 0
        for worker in self.workers:
            with self._talking(worker):
                worker.conn.send(("memory", 0, []))
            total += self._reply(worker)[1]
        return total

    def close(self) -> None:
        self.closed = True
        self._finalizer()


class SplitOverProcesses(Function):
    """`model(x)` with the rows of `x` split between this process and forked workers, as one
    node of the caller's graph (the process counterpart of `parallel.SplitBatch`).

    `SplitOverProcesses.apply(x, *params, model=model, split=split, params=params)`. This process
    runs the first slice through the model itself; each worker runs its slice and keeps the graph
    until the node's backward sends it the output gradient, then writes its weights' gradients
    into shared memory, and the node adds them to each parameter's `.grad`.
    """

    def forward(self, x, *weights, model, split: ProcessSplit, params: list[Tensor]):
        from tinytorch.accel.parallel import _blas_controller, _forward_slice

        _blas_controller().limit(limits=1, user_api="blas")  # one core each (see run_threads)
        n, parts = len(x), 1 + len(split.workers)
        bounds = [round(i * n / parts) for i in range(parts + 1)]
        self.bounds = list(zip(bounds[:-1], bounds[1:]))
        self.split, self.params = split, params
        self.step = split.send_forward([x[a:b] for a, b in self.bounds[1:]])
        self.pending = True
        weakref.finalize(self, _dropped, weakref.ref(split), self.step, self.__dict__)
        try:  # the model itself: its slice's graph ends at the parameters, as unsplit
            self.own = _forward_slice(model, x[slice(*self.bounds[0])])
        finally:
            outs = split.outputs()  # every worker answers, even when this slice failed
        return np.concatenate([self.own.data, *outs])

    def backward(self, grad):
        from tinytorch.accel.parallel import _backward_slice

        self.split.send_backward(self.step, [grad[a:b] for a, b in self.bounds[1:]])
        self.pending = False
        params, fresh, reached = self.params, None, set()
        if all(p.grad is None for p in params):  # the usual step: one array for them all,
            fresh = self.split.new_grads()  # which the engine adds this slice's gradients into
        if fresh is not None:
            reached = reached_leaves(self.own)
            for p, g in zip(params, fresh):
                p.grad = g
        try:
            _backward_slice(self.own, grad[slice(*self.bounds[0])])
        except BaseException:
            if fresh is not None:
                for p in params:
                    p.grad = None
            raise
        finally:
            found = self.split.gradients()
        self.own = None
        for i, (p, needed) in enumerate(zip(params, self.needs_grad[1:])):
            theirs = [f[i] for f in found if f[i] is not None] if needed else []
            if fresh is not None and not (theirs or (needed and id(p) in reached)):
                p.grad = None  # no gradient reached it: it stays None, as unsplit
                continue
            for g in theirs:
                if p.grad is None:
                    p.grad = g.copy()  # shared memory: the next step writes over it
                else:
                    p.grad += g
        return (None,) * (1 + len(params))


def _unshared(views: list[np.ndarray]) -> bool:
    """Whether only the list `views` holds these views and their base (CPython's counts: the
    base is held by each view and getrefcount's argument; a view by the list, the loop's
    variable and the argument)."""
    if sys.getrefcount(views[0].base) != len(views) + 1:
        return False
    for view in views:
        if sys.getrefcount(view) != 3:
            return False
    return True


_BY_WEIGHTS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id(mmap) -> split


def flat_split(params: list[Tensor]) -> ProcessSplit | None:
    """The process split that holds `params`' weights and gradients as one flat array each
    (`flat_weights`, `grad_views[0].base`, each parameter starting at its `starts` entry): when
    `params` are exactly its parameters, in order, each `.data` its shared view and each `.grad`
    its part of the last backward's one array; else None. An optimizer can then update them all
    with a few large numpy calls."""
    if not params:
        return None
    base = memory_of(params[0].data)
    split = _BY_WEIGHTS.get(id(base)) if base is not None else None
    if split is None or split.grad_views is None or len(params) != len(split.params):
        return None
    for p, q, view, grad in zip(params, split.params, split.shared, split.grad_views):
        if p is not q or p.data is not view or p.grad is not grad:
            return None
    return split


def split_of(model: Module) -> ProcessSplit | None:
    """The process split `model` trains with, once its first split forked the workers."""
    return vars(model).get("_process_split")


def _nothing() -> None:
    return None


def _dropped(split_ref, step: int, state: dict) -> None:
    split = split_ref()
    if split is not None and state.get("pending"):
        split.drop(step)


__all__ = ["ProcessSplit", "SplitOverProcesses", "WorkerError", "can_fork", "flat_split",
    "split_of"]  # fmt: skip
