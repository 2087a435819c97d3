"""Profiling a whole training step or a generation with module 14's `Profiler`.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson. `profile_step` runs training steps of
a language model (forward, loss, backward and, with an optimizer, the update) under the profiler,
timing the whole step around it; a second run measures the real peak with `tracemalloc`, which
numpy reports every array allocation to (gradients, temporaries and all). Tracing slows Python
down, so that run is not timed. `profile_generation` does the same for `model.generate`: with
module 17 in the package, generation uses its KV cache; before it, every step recomputes the
whole context.
"""

from __future__ import annotations

import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.hooks import listen
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor
from tinytorch.profile.profiler import OpRow, Profiler, by_operation


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

    for _warm in range(warmup):
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


__all__ = ["Profile", "profile_step", "profile_generation"]
