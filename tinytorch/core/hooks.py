"""Listening to the engine: every operation, gradient and layer call, without patching anything.

Given code (no course exercise writes it). `Function.apply` (module 01) and `Module.__call__`
(module 03) tell the active listeners about each forward, each backward and each layer call.
With no listener active they cost one tuple test per call. Module 14's profiler and
`tito diagnose` are listeners.

    class Shapes(Listener):
        def __init__(self):
            self.seen = []

        def forward(self, fn, inputs, kwargs, output, seconds):
            self.seen.append((type(fn).__name__, output.shape))

    with listen(Shapes()) as shapes:
        model(x).sum().backward()
    print(shapes.seen)
"""

from __future__ import annotations

import threading
import time


class Listener:
    """Override any of these; each is called after the event, on the thread that ran it."""

    def forward(self, fn, inputs: list, kwargs: dict, output, seconds: float) -> None:
        """`fn.forward(*inputs, **kwargs)` returned the array `output` after `seconds`."""

    def backward(self, fn, grad, grads: tuple, seconds: float) -> None:
        """`fn.backward(grad)` returned `grads` (one array or None per input)."""

    def enter(self, module) -> None:
        """`module(...)` is about to run its forward."""

    def exit(self, module, output, seconds: float) -> None:
        """`module(...)` returned `output` after `seconds` (inner operations included)."""


class _State:
    active: tuple[Listener, ...] = ()
    lock = threading.Lock()


def listeners() -> tuple[Listener, ...]:
    """The listeners active now (an empty tuple almost always)."""
    return _State.active


class listen:
    """`with listen(listener) as it: ...` tells `listener` about everything run inside."""

    def __init__(self, listener: Listener):
        self.listener = listener

    def __enter__(self) -> Listener:
        with _State.lock:
            _State.active = (*_State.active, self.listener)
        return self.listener

    def __exit__(self, *exc) -> None:
        with _State.lock:
            _State.active = tuple(x for x in _State.active if x is not self.listener)


def run_forward(fn, arrays: list, kwargs: dict):
    """`fn.forward(*arrays, **kwargs)`, told to the listeners; `fn.backward` of this one
    operation is wrapped so the listeners hear its backward too (the class is untouched)."""
    start = time.perf_counter()
    output = fn.forward(*arrays, **kwargs)
    seconds = time.perf_counter() - start
    for listener in _State.active:
        listener.forward(fn, arrays, kwargs, output, seconds)
    own_backward = fn.backward

    def backward(grad):
        start = time.perf_counter()
        grads = own_backward(grad)
        seconds = time.perf_counter() - start
        for listener in _State.active:
            listener.backward(fn, grad, grads, seconds)
        return grads

    fn.backward = backward  # an attribute of this instance only
    return output


def run_module(module, args: tuple, kwargs: dict):
    """`module.forward(*args, **kwargs)`, with `enter` and `exit` told to the listeners."""
    for listener in _State.active:
        listener.enter(module)
    start = time.perf_counter()
    output = module.forward(*args, **kwargs)
    seconds = time.perf_counter() - start
    for listener in _State.active:
        listener.exit(module, output, seconds)
    return output


__all__ = ["Listener", "listeners", "listen", "run_forward", "run_module"]
