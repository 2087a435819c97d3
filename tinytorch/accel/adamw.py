"""AdamW through module 18's fused update: `accelerate(optimizer)` mixes `FastAdam` into Adam or AdamW.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it runs the update module 18
writes (`tinytorch.accel.optim.FusedAdam`) over every parameter: one parameter at a time, over
threads by size for large models, or, when `accelerate`'s process split holds the weights and the
gradients as one array each (`tinytorch.accel.processes.flat_split`), over those arrays block by
block: a contiguous share of the blocks in each of the split's processes when its workers can see
the moments too (the split's shared memory), else on this process's threads.
"""

import copy

import numpy as np

from tinytorch.accel import blocking
from tinytorch.accel.optim import FusedAdam
from tinytorch.accel.parallel import run_threads


class FastAdam(FusedAdam):
    """Module 06's Adam or AdamW stepping through module 18's `FusedAdam._fused_update`.

    With `workers` > 1 (accelerate's default: one per core) and enough values to update, the
    parameters are shared out over threads by size; each thread updates its own parameters with
    a scratch buffer of its own (numpy lets go of the GIL inside every kernel).
    """

    decoupled_decay = True
    workers = 1
    # fewer values than this: one thread. Every numpy call hands the GIL over, and the threads
    # wait for each other at each one: a small GPT's 810k values took 1.9 ms on one thread and
    # 2.4-2.6 ms on two, a medium one's 4.8M values 12.2 ms on one and 8.0 ms on two.
    THREADED_VALUES = 1 << 21

    def step(self) -> None:
        """One update of every parameter that has a gradient (AdamW: decay first)."""
        jobs = [(p, state) for p, state in zip(self.params, self.state) if p.grad is not None]
        if self._flat_step(jobs):
            return
        if self.workers < 2 or sum(p.data.size for p, _ in jobs) < self.THREADED_VALUES:
            self._update(jobs)
            return
        groups = [[] for _ in range(self.workers)]
        sizes = [0] * self.workers
        for job in sorted(jobs, key=lambda job: -job[0].data.size):  # largest first, to the
            least = sizes.index(min(sizes))  # group with the fewest values so far
            groups[least].append(job)
            sizes[least] += job[0].data.size
        self._each_helper(_update_group, [(group,) for group in groups])

    def _each_helper(self, fn, work: list[tuple]) -> None:
        """`fn(optimizer, *args)` for each `args` of `work`: the first with this optimizer in this
        thread, the others on threads, each with a copy of it that has this step's lr and betas
        and a scratch buffer of its own (kept for the next step)."""
        if len(work) == 1:
            fn(self, *work[0])
            return
        buffers = vars(self).setdefault("_thread_buffers", {})
        helpers = []
        for i in range(1, len(work)):
            helper = copy.copy(self)
            helper._fused_buffer = buffers.get(i)
            helpers.append(helper)
        run_threads(fn, [(opt, *args) for opt, args in zip([self, *helpers], work)])
        for i, helper in enumerate(helpers, 1):
            buffers[i] = helper._fused_buffer

    def _flat_step(self, jobs) -> bool:
        """The step over one flat array, block by block, when accelerate's process split holds
        every parameter's weights and gradients as one array each (`processes.flat_split`):
        about 13 numpy calls a block instead of 13 a parameter, the same numbers. The moments
        are then views of two flat arrays too, so `state_dict` sees them as before. False (and
        nothing done) otherwise: some parameter without a gradient, Adam's L2 decay (it would
        write into the gradients), moments from elsewhere (a `load_state_dict`)."""
        from tinytorch.accel.processes import flat_split

        if len(jobs) != len(self.params) or (self.weight_decay and not self.decoupled_decay):
            return False
        split = flat_split(self.params)
        if split is None:
            return False
        weights, grads, offsets = split.flat_weights, split.grad_views[0].base, split.starts
        moments = vars(self).get("_flat_moments")
        if moments is None or moments[0].shape != weights.shape:
            if any(state for state in self.state):  # moments of their own: keep them
                return False
            moments = split.claim_moments(self)  # in memory the workers see, when free
            if moments is None:
                moments = (np.zeros_like(weights), np.zeros_like(weights))
            self._flat_moments = tuple(moments)
            for _, state in jobs:
                state.update(step=0)
            _moment_views(jobs, offsets, moments)
        elif split.moments_owner() is None and all(state for _, state in jobs):
            shared = split.claim_moments(self)  # an earlier split's: into this one's, once
            if shared is not None:
                for whole, into in zip(moments, shared):
                    into[...] = whole
                moments = self._flat_moments = tuple(shared)
                _moment_views(jobs, offsets, moments)
        steps = {state.get("step") for _, state in jobs}
        for _, state in jobs:
            m, v = state.get("exp_avg"), state.get("exp_avg_sq")
            if m is None or v is None or m.base is not moments[0] or v.base is not moments[1]:
                return False
        if len(steps) != 1:
            return False
        (step,) = steps
        if not self._split_step(split, weights, grads, moments, step):
            shares = _shares(weights.size, 1)
            if self.workers > 1 and weights.size >= self.THREADED_VALUES:
                shares = _shares(weights.size, self.workers)
            self._each_helper(_flat_blocks, [(weights, grads, moments, step, s) for s in shares])
        for _, state in jobs:
            state["step"] = step + 1
        return True

    def _split_step(self, split, weights, grads, moments, step: int) -> bool:
        """The flat step shared with the split's worker processes, one contiguous share of the
        blocks each (they would wait for this process otherwise); False when they cannot run
        it: moments or gradients they do not see, or an update that is not module 18's."""
        if type(self)._fused_update is not FusedAdam._fused_update:
            return False
        if type(self)._buffer is not FusedAdam._buffer:
            return False
        shares = _shares(weights.size, 1 + len(split.workers))
        hyper = {name: getattr(self, name) for name in HYPER}
        if not split.adamw_share(self, step, shares[1:], hyper):
            return False
        try:
            _flat_blocks(self, weights, grads, moments, step, shares[0])
        finally:
            split.adamw_done()
        return True

    def _update(self, jobs) -> None:
        shrink = 1.0 - self.lr * self.weight_decay  # AdamW's decay, a factor on the weights
        for p, state in jobs:
            if not self.weight_decay:
                self._fused_update(p, state, p.grad)
            elif self.decoupled_decay:
                np.multiply(p.data, shrink, out=p.data)
                self._fused_update(p, state, p.grad)
            else:  # Adam's L2 form: the decay joins the gradient, which stays the caller's
                self._fused_update(p, state, np.add(p.grad, self.weight_decay * p.data))


HYPER = ("lr", "beta1", "beta2", "eps", "weight_decay")  # what a worker's share of a step needs


class _StepHelper(FusedAdam):
    """A worker's stand-in for the optimizer: its numbers (`HYPER`) and a scratch buffer."""


def flat_share(helper, hyper: dict, weights, grads, moments, step: int, parts) -> _StepHelper:
    """A worker's share of `_flat_step` (the blocks `parts`); returns the helper to keep."""
    helper = _StepHelper() if helper is None else helper
    vars(helper).update(hyper)
    _flat_blocks(helper, weights, grads, moments, step, parts)
    return helper


SHARE_ALIGN = 16  # values (not bytes): a share starts on a 64-byte cache line of float32


def _shares(size: int, count: int) -> list[list[slice]]:
    """The flat arrays' `size` values cut into `count` contiguous shares of about as many values
    each (not as many blocks: a small GPT's 7 blocks, the last one short, gave this process 4
    full ones and a worker 2 and the short one, 1.75 against 1.09 ms), each share as blocks of
    at most `blocking.BLOCK` values."""
    cut = [min(size, round(i * size / count / SHARE_ALIGN) * SHARE_ALIGN) for i in range(count)]
    cut.append(size)
    return [blocking.blocks(end, start=begin) for begin, end in zip(cut, cut[1:])]


def _moment_views(jobs, offsets, moments) -> None:
    """Each parameter's moments: views of the two flat arrays, where its weights start."""
    for (p, state), start in zip(jobs, offsets):
        for key, whole in zip(("exp_avg", "exp_avg_sq"), moments):
            state[key] = whole[start : start + p.data.size].reshape(p.shape)


def _update_group(optimizer, jobs) -> None:
    optimizer._update(jobs)


def _flat_blocks(optimizer, weights, grads, moments, step: int, parts: list[slice]) -> None:
    """AdamW's step on the blocks `parts` of the flat arrays (decay first, as `_update` does)."""
    for part in parts:
        w = weights[part]
        if optimizer.weight_decay:
            w *= 1.0 - optimizer.lr * optimizer.weight_decay
        state = {"step": step, "exp_avg": moments[0][part], "exp_avg_sq": moments[1][part]}
        optimizer._fused_update(_FlatPart(w), state, grads[part])


class _FlatPart:
    """A block of the flat weights, standing in for a parameter in `_fused_update`."""

    def __init__(self, data: np.ndarray):
        self.data, self.shape = data, data.shape


class FastAdamW(FastAdam):
    decoupled_decay = True


class FastAdamL2(FastAdam):
    decoupled_decay = False


__all__ = ["FastAdam", "FastAdamW", "FastAdamL2"]  # fmt: skip
