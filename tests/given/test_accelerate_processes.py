"""`accelerate(gpt)` on Linux splits a training batch between this process and a forked worker
that shares the weights: the loss, gradients and training of the unsplit model, a worker that
follows every change of the weights, and no worker left behind."""

import copy
import os
import pickle
import signal

import numpy as np
import pytest
from split_helpers import gpt, loss_and_grads

from tinytorch.accel.accelerate import accelerate, accelerated, plain
from tinytorch.accel.processes import WorkerError, can_fork, split_of
from tinytorch.core.layers import Module
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import SGD, AdamW
from tinytorch.core.tensor import Tensor

pytestmark = pytest.mark.skipif(not can_fork(), reason="the process split is Linux's")


def close(got, want):
    scale = max(np.abs(g).max() for g in want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * scale)


@pytest.fixture
def forked(rng):
    """A split GPT after one step (its worker forked), that step's batch, and the worker's pid."""
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    loss_and_grads(split, x, y)
    (pid,) = worker_pids(split)
    assert pid != os.getpid() and alive(pid)  # another process, running
    return split, x, y, pid


def like_the_whole_batch(split, x, y, seed=0):
    """The split model's gradients are those of the same model unsplit."""
    whole = accelerate(gpt(seed), workers=1)
    close(loss_and_grads(split, x, y)[3], loss_and_grads(whole, x, y)[3])


def worker_pids(model) -> list[int]:
    return [w.pid for w in model._process_split.workers]


def alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


def test_training_with_the_worker_follows_the_optimizers_updates(rng):
    data = [(rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))) for _ in range(4)]
    weights = []
    for split in (False, True):
        model = accelerate(gpt(), workers=2 if split else 1, processes=True)
        opt = SGD(model.parameters(), lr=0.5)  # in place, and linear: a stale weight shows
        for x, y in data:
            opt.zero_grad()
            cross_entropy(model(Tensor(x)), y).backward()
            opt.step()
        weights.append([p.data.copy() for p in model.parameters()])
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_weights_replaced_by_assignment_reach_the_worker(rng):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    loss_and_grads(split, x, y)  # forks the worker with the first weights
    other = gpt(seed=1)
    for p, q in zip(split.parameters(), other.parameters()):
        p.data = q.data.copy()  # what load_state_dict does
    whole = accelerate(gpt(seed=1), workers=1)
    close(loss_and_grads(split, x, y)[3], loss_and_grads(whole, x, y)[3])


def test_two_forwards_then_one_backward_through_both(rng):
    x1, x2 = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    grads = []
    for workers in (1, 2):
        model = accelerate(gpt(), workers=workers, processes=True)
        loss = cross_entropy(model(Tensor(x1)), x2) + cross_entropy(model(Tensor(x2)), x1)
        loss.backward()
        grads.append([p.grad.copy() for p in model.parameters()])
    close(grads[1], grads[0])


def test_a_forward_dropped_without_backward_leaves_the_next_step_right(rng):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    for _ in range(3):
        cross_entropy(split(Tensor(y)), x)  # evaluated with a graph, never differentiated
    like_the_whole_batch(split, x, y)
    assert split._process_split.dropped == []  # the worker was told to free those graphs


def test_an_error_in_the_workers_rows_is_raised_here_and_the_next_step_works(rng):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    loss_and_grads(split, x, y)
    bad = x.copy()
    bad[3, 0] = 99  # a token the vocabulary has not: only the worker's slice holds it
    with pytest.raises(Exception) as raised:
        split(Tensor(bad))
    with pytest.raises(type(raised.value)):
        accelerate(gpt(), workers=1)(Tensor(bad))  # the same error the whole batch gives
    like_the_whole_batch(split, x, y)


def test_a_killed_worker_is_replaced_before_the_next_step(forked):
    split, x, y, pid = forked
    os.kill(pid, signal.SIGKILL)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead, left for the split to reap
    like_the_whole_batch(split, x, y)
    (new,) = worker_pids(split)
    assert new != pid and alive(new)


def test_a_worker_killed_before_the_optimizer_step_leaves_the_step_to_this_process(rng):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    weights = []
    for kill in (False, True):
        split = accelerate(gpt(), workers=2, processes=True)
        opt = accelerate(AdamW(split.parameters(), lr=1e-2), workers=2)
        cross_entropy(split(Tensor(x)), y).backward()
        (pid,) = worker_pids(split)
        if kill:
            os.kill(pid, signal.SIGKILL)
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        opt.step()
        assert split_of(split).helped == (0 if kill else 1)
        weights.append([p.data.copy() for p in split.parameters()])
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


def test_a_worker_killed_inside_a_step_is_one_clear_error(rng):
    x = rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    logits = split(Tensor(x))
    (pid,) = worker_pids(split)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(
        WorkerError, match=f"\\(pid {pid}\\) stopped; accelerate\\(model, workers=1\\)"
    ):
        cross_entropy(logits, x).backward()


def test_an_interrupted_step_stops_the_workers_and_the_next_step_is_right(forked, monkeypatch):
    from tinytorch.accel import processes

    split, x, y, pid = forked
    receive = processes.recv_array

    def interrupted(conn, header):
        monkeypatch.setattr(processes, "recv_array", receive)
        raise KeyboardInterrupt  # Ctrl-C while the worker's answer waits in the pipe

    monkeypatch.setattr(processes, "recv_array", interrupted)
    with pytest.raises(KeyboardInterrupt):
        split(Tensor(x))
    assert not alive(pid)
    like_the_whole_batch(split, x, y)


def test_plain_and_garbage_collection_stop_the_worker(forked):
    split, x, y, pid = forked
    plain(split)
    assert not alive(pid) and "_process_split" not in vars(split)
    again = accelerate(gpt(), workers=2, processes=True)
    loss_and_grads(again, x, y)
    (pid,) = worker_pids(again)
    del again
    import gc

    gc.collect()
    assert not alive(pid)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_model_trains_with_a_worker_of_its_own(rng, how):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    want = loss_and_grads(split, x, y)[3]
    (pid,) = worker_pids(split)
    clone = copy.deepcopy(split) if how == "deepcopy" else pickle.loads(pickle.dumps(split))
    assert accelerated(clone) == accelerated(split)  # the fast layers stay fast
    assert type(clone.blocks[0].attention) is type(split.blocks[0].attention)
    assert vars(clone).get("_process_split") is None
    close(loss_and_grads(clone, x, y)[3], want)
    assert worker_pids(clone) != [pid] and alive(pid)
    assert pickle.loads(pickle.dumps(split._process_split)) is None


def test_a_changed_mode_forks_a_worker_that_has_it(forked):
    split, x, y, pid = forked
    split.blocks[0].training = False
    loss_and_grads(split, x, y)
    assert worker_pids(split) != [pid] and not alive(pid)


def adamw_run(rng, flat: bool, steps=3, load_from=None, refork_at=None):
    """Weights and optimizer state after `steps` AdamW steps of a split model, with the flat
    update allowed or not, and the flat steps the worker took a share of since its fork;
    `load_from`: an optimizer state loaded before the first step; `refork_at`: a step before
    which a changed mode forks a new worker (the numbers stay: the GPT has no dropout)."""
    import importlib

    module = importlib.import_module("tinytorch.accel.adamw")
    data = [(rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))) for _ in range(steps)]
    model = accelerate(gpt(), workers=2, processes=True)
    opt = accelerate(AdamW(model.parameters(), lr=1e-2, weight_decay=0.1), workers=2)
    if load_from is not None:
        opt.load_state_dict(load_from)
    used, flat_step = [], opt._flat_step

    def spy(jobs):
        used.append(flat and flat_step(jobs))
        return used[-1]

    opt._flat_step = spy
    assert isinstance(opt, module.FastAdamW)
    for i, (x, y) in enumerate(data):
        if i == refork_at:
            model.blocks[0].training = False
        opt.lr = 1e-2 / (i + 1)  # a schedule: every block takes this step's rate
        opt.zero_grad()
        cross_entropy(model(Tensor(x)), y).backward()
        opt.step()
    split = split_of(model)
    if used and used[-1]:  # the flat step's moments: in the memory the worker sees
        assert split.moments_owner() is opt
        assert all(a is b for a, b in zip(opt._flat_moments, split.flat["moments"]))
    weights = [p.data.copy() for p in model.parameters()]
    return weights, opt.state_dict(), used + [split.helped]


@pytest.mark.parametrize("how", ["worker", "threads", "one thread", "new worker"])
def test_the_flat_adamw_step_gives_the_per_parameter_numbers(rng, monkeypatch, how):
    from tinytorch.accel import blocking
    from tinytorch.accel.accelerate import FastAdam
    from tinytorch.accel.processes import ProcessSplit

    monkeypatch.setattr(blocking, "BLOCK", 256)  # many blocks, shared out over the processes
    if how in ("threads", "one thread"):  # this process alone, as where the worker cannot help
        monkeypatch.setattr(ProcessSplit, "adamw_share", lambda *args: False)
    if how == "threads":
        monkeypatch.setattr(FastAdam, "THREADED_VALUES", 1)
    seed, refork = rng.integers(1 << 30), 1 if how == "new worker" else None
    weights, state, used = adamw_run(np.random.default_rng(seed), flat=True, refork_at=refork)
    want_weights, want_state, _ = adamw_run(
        np.random.default_rng(seed), flat=False, refork_at=refork
    )
    helped = {"worker": 3, "new worker": 2}.get(how, 0)  # the new worker: the steps after it
    assert used == [True, True, True, helped]
    for a, b in zip(weights, want_weights):
        np.testing.assert_array_equal(a, b)
    assert state.keys() == want_state.keys()
    for key in state:
        np.testing.assert_array_equal(state[key], want_state[key])


def test_loaded_moments_keep_the_per_parameter_step(rng):
    seed = rng.integers(1 << 30)
    _, state, _ = adamw_run(np.random.default_rng(seed), flat=False, steps=1)
    weights, _, used = adamw_run(np.random.default_rng(seed), flat=True, load_from=state)
    want, _, _ = adamw_run(np.random.default_rng(seed), flat=False, load_from=state)
    assert used == [False, False, False, 0]  # moments of their own arrays: not the flat ones
    for a, b in zip(weights, want):
        np.testing.assert_array_equal(a, b)


def test_the_gradient_array_is_used_again_only_when_no_one_holds_it(rng):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    first = loss_and_grads(split, x, y)[3]
    base = id(split.parameters()[0].grad.base)
    assert in_shared_memory(split)
    for p in split.parameters():
        p.grad = None
    loss_and_grads(split, x, y)
    assert id(split.parameters()[0].grad.base) == base  # dropped by everyone: zeroed, used again
    kept = split.parameters()[3].grad  # a user keeps one gradient past zero_grad
    want = kept.copy()
    for p in split.parameters():
        p.grad = None
    again = loss_and_grads(split, x, y)[3]
    assert split.parameters()[3].grad is not kept  # a new array: the kept one is left alone
    np.testing.assert_array_equal(kept, want)
    close(again, first)
    assert not in_shared_memory(split)  # one of this process's: the workers cannot see it
    del kept
    for p in split.parameters():
        p.grad = None
    close(loss_and_grads(split, x, y)[3], first)
    assert in_shared_memory(split)  # no one holds it: the shared array again


def in_shared_memory(model) -> bool:
    """Whether the gradients are in the shared array the workers read in the optimizer's step."""
    from tinytorch.accel.workers import memory_of

    return memory_of(model.parameters()[0].grad) is split_of(model).own


def test_a_parameter_no_gradient_reaches_keeps_none(rng):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    for workers in (1, 2):
        model = gpt()
        model.spare = Tensor(np.ones(3, dtype=np.float32), requires_grad=True)  # never used
        model = accelerate(model, workers=workers, processes=True)
        assert any(p is model.spare for p in model.parameters())
        cross_entropy(model(Tensor(x)), y).backward()
        assert model.spare.grad is None
        assert all(p.grad is not None for p in model.parameters() if p is not model.spare)


class _ByFirstValue(Module):
    """Scales its rows by `even` when the first value of the batch it gets is even, else by
    `odd`: which parameter a slice reaches depends on its rows."""

    def __init__(self):
        self.even = Tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32), requires_grad=True)
        self.odd = Tensor(np.array([-1.0, 0.5, 4.0], dtype=np.float32), requires_grad=True)

    def forward(self, x):
        return x * (self.even if int(x.data[0, 0]) % 2 == 0 else self.odd)


def test_a_parameter_one_slice_reaches_gets_that_slices_gradient(rng):
    from tinytorch.accel.parallel import split_batch

    x = rng.integers(0, 9, (4, 3)).astype(np.float32)
    x[0, 0], x[2, 0] = 2, 3  # this process's rows pick `even`, the worker's `odd`
    model = _ByFirstValue()
    split_batch(model, 2, processes=True)
    for _ in range(2):  # the second step writes over the first's array
        for p in model.parameters():
            p.grad = None
        out = model(Tensor(x))
        (out * out).sum().backward()
        assert split_of(model) is not None  # it ran on the worker
        np.testing.assert_allclose(model.even.grad, (2 * x[:2] * x[:2] * model.even.data).sum(0))
        np.testing.assert_allclose(model.odd.grad, (2 * x[2:] * x[2:] * model.odd.data).sum(0))


def test_a_changed_setting_or_layer_reaches_the_worker(rng):
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), workers=2, processes=True)
    loss_and_grads(split, x, y)
    whole = accelerate(gpt(), workers=1)
    for model in (split, whole):
        model.blocks[1].norm_first = False  # a number-changing setting, by value
        model.blocks[0].mlp = copy.deepcopy(model.blocks[1].mlp)  # a layer swapped
    close(loss_and_grads(split, x, y)[3], loss_and_grads(whole, x, y)[3])
    steps = [worker_pids(split)]
    for _ in range(3):  # a setting the forward itself clears (last_attention) forks no more
        loss_and_grads(split, x, y)
        steps.append(worker_pids(split))
    assert steps[1] == steps[2] == steps[3]


def test_no_parts_splits_the_batch_and_keeps_every_layer_the_lessons(rng):
    # accelerate(model, parts=()): the student's own lesson code on every core, as the GPT
    # milestone runs a student who completed 01-13 and not 18
    from tinytorch.core.attention import MultiHeadAttention
    from tinytorch.nn import LayerNorm

    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    split = accelerate(gpt(), parts=(), workers=2, processes=True)
    assert accelerated(split) == set()
    block = split.blocks[0]
    assert type(block.attention) is MultiHeadAttention and type(block.ln1) is LayerNorm
    loss_and_grads(split, x, y)
    (pid,) = worker_pids(split)
    assert pid != os.getpid() and alive(pid)
    close(loss_and_grads(split, x, y)[3], loss_and_grads(gpt(), x, y)[3])  # the lessons, unsplit
