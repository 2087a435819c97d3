"""Forked worker processes that run slices of a model's batch on command: `accelerate`'s split.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson. A `Worker` is forked from
the caller's process with the model as it is then; it waits on a socket pair for commands
(`forward` rows, `backward` the output's gradient, `adamw` its share of an optimizer step,
`memory`) and answers each one, an error
included, so the caller can raise it. Its gradients go into shared memory the caller made
before the fork (`tinytorch.accel.processes.ProcessSplit`). It exits when the caller's end of the
connection closes, and ignores Ctrl-C, which is the caller's: the caller stops it.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
import warnings
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import numpy as np

from tinytorch.core.layers import Module
from tinytorch.core.tensor import Tensor

_PARENT_ENDS: set[int] = set()  # this process's ends of its workers' connections (file numbers)


def can_fork() -> bool:
    """Whether this system forks the way the workers need (Linux: copy-on-write, no exec)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def memory_of(array: np.ndarray):
    """The object whose memory `array` views (a split's mmap), or None for an array of its own."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


def send_array(conn: Connection, a: np.ndarray, head: tuple) -> None:
    """`a` as two messages: `(*head, shape, dtype)` (the command or status it goes with travels
    in the same message: each message wakes the other process once) and the bytes."""
    a = np.ascontiguousarray(a)
    conn.send((*head, a.shape, a.dtype.str))
    conn.send_bytes(memoryview(a).cast("B"))


def recv_array(conn: Connection, header) -> np.ndarray:
    """The bytes of the array `send_array` sent, whose first message (the head, then `header`:
    its shape and dtype) was read already."""
    shape, dtype = header
    out = np.empty(shape, dtype=dtype)
    if out.nbytes:
        conn.recv_bytes_into(memoryview(out).cast("B"))
    else:
        conn.recv_bytes()
    return out


class WorkerError(RuntimeError):
    """A worker process stopped or failed; the message says what it reported."""


class Worker:
    """One forked process: runs `forward(rows)` and `backward(grad)` of one slice at a time."""

    def __init__(self, model: Module, params: list[Tensor], grads: list[np.ndarray], forward,
                 flat: dict | None = None):  # fmt: skip
        self.conn, child = Pipe()  # a socket pair, each end a Connection
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()  # the worker must not write this process's pending output again
            except (AttributeError, OSError, ValueError):
                pass
        with warnings.catch_warnings():  # Python 3.12 warns of fork with threads running:
            warnings.simplefilter("ignore", DeprecationWarning)  # the worker starts none
            self.pid = os.fork()
        if self.pid == 0:  # the worker: serve until this process's end closes the connection
            code = 0
            try:
                self.conn.close()
                for fd in _PARENT_ENDS:  # other workers' ends: they must see EOF when we go
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                _serve(child, model, params, grads, forward, flat)
            except BaseException:  # noqa: BLE001 - the worker must never return to the caller
                code = 1
            finally:
                os._exit(code)
        child.close()
        _PARENT_ENDS.add(self.conn.fileno())

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            done = self.pid
        if done:
            self.pid = None  # reaped: close() must not wait for it
        return not done

    def close(self) -> None:
        """Stop the worker now, whatever it is doing (it holds nothing that outlives it)."""
        if self.conn.closed:
            return
        _PARENT_ENDS.discard(self.conn.fileno())
        self.conn.close()
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ChildProcessError, ProcessLookupError):
                pass
            self.pid = None


def _serve(conn: Connection, model, params, grads, forward, flat: dict | None) -> None:
    from tinytorch.accel.parallel import _INSIDE, _blas_controller

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the caller, who stops us

    _blas_controller().limit(limits=1, user_api="blas")
    _INSIDE.active = True  # a worker's slice splits no further
    outs: dict[int, Tensor] = {}  # step number -> the output whose graph waits for a backward
    helper = None  # the optimizer's stand-in, its scratch buffer kept from step to step
    while True:
        try:
            command, step, dropped, *payload = conn.recv()
        except EOFError:
            return
        for old in dropped:  # outputs whose node the caller let go without a backward
            outs.pop(old, None)
        try:
            if command == "forward":
                rows = recv_array(conn, payload)
                out = forward(model, Tensor(rows))
                if out.requires_grad:
                    outs[step] = out
                send_array(conn, out.data, head=("ok",))
            elif command == "backward":
                grad = recv_array(conn, payload)
                out = outs.pop(step, None)
                reached = reached_leaves(out) if out is not None else set()
                np.frombuffer(memory_of(grads[0]), np.uint8).fill(0)  # the whole buffer at once
                for p, shared in zip(params, grads):  # the engine adds into shared memory
                    p.grad = shared
                try:
                    if out is not None:
                        out.backward(grad)
                finally:
                    for p in params:
                        p.grad = None
                found = [id(p) in reached for p in params]
                conn.send(("ok", found, time.process_time()))
            elif command == "adamw":  # its share of the optimizer's blocks (tinytorch.accel.adamw)
                from tinytorch.accel.adamw import flat_share

                hyper, parts = payload[0]
                helper = flat_share(
                    helper, hyper, flat["weights"], flat["own"], flat["moments"], step, parts
                )
                conn.send(("ok", time.process_time()))
            elif command == "memory":
                conn.send(("ok", peak_private_kib()))
        except Exception as err:  # noqa: BLE001 - reported to the caller, who raises it
            try:
                pickle.dumps(err)
            except Exception:  # noqa: BLE001
                err = WorkerError(f"{type(err).__name__}: {err}")
            conn.send(("error", err))


def private_kib(pid: int | str = "self") -> int:
    """Memory only this process holds (private pages: its own arrays, copied-on-write pages)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
    except OSError:
        return 0
    return total


def peak_private_kib() -> int:
    """This process's private memory at its peak, in KiB: its private pages now plus what its
    resident size has shrunk since its peak (pages freed since then were its own: a worker's
    shared pages, the weights and what it was forked with, stay mapped)."""
    status = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    status[key] = int(value.split()[0])
    except OSError:
        return 0
    return private_kib() + max(0, status.get("VmHWM", 0) - status.get("VmRSS", 0))


def reached_leaves(out: Tensor) -> set[int]:
    """ids of the tensors with no graph above them that a backward from `out` reaches."""
    from tinytorch.core.autograd import topological_order

    if not out.requires_grad:
        return set()
    return {id(t) for t in topological_order(out) if t._ctx is None}


def close_all(workers: list[Worker]) -> None:
    for worker in workers:
        worker.close()


__all__ = ["Worker", "WorkerError", "can_fork", "close_all", "reached_leaves", "memory_of",
    "peak_private_kib", "private_kib", "recv_array", "send_array"]  # fmt: skip
