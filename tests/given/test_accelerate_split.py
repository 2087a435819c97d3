"""`accelerate(gpt)` splits a training batch over threads (`processes=False`; the default where
the system cannot fork): the user's own loop gets both cores, with the loss and gradients of the
unsplit forward, and nothing else changes. tests/given/test_accelerate_processes.py tests the
split over forked processes, Linux's default."""

import importlib
import threading

import numpy as np
import pytest
import threadpoolctl
from split_helpers import gpt, loss_and_grads

from tinytorch.accel import parallel
from tinytorch.accel.accelerate import accelerate, plain
from tinytorch.accel.parallel import DataParallel, SplitBatch, default_workers
from tinytorch.accel.processes import SplitOverProcesses
from tinytorch.core.autograd import no_grad
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.models.transformer import GPT


@pytest.mark.parametrize("processes", [False, True])
@pytest.mark.parametrize("rows", [2, 5])
def test_a_split_forward_gives_the_whole_batchs_loss_and_gradients(rng, rows, processes):
    x, y = rng.integers(0, 17, (rows, 8)), rng.integers(0, 17, (rows, 8))
    whole = accelerate(gpt(), workers=1)
    split = accelerate(gpt(), workers=2, processes=processes)
    logits_w, node_w, loss_w, grads_w = loss_and_grads(whole, x, y)
    logits_s, node_s, loss_s, grads_s = loss_and_grads(split, x, y)
    assert type(whole) is GPT and type(split) is GPT  # the class stays the user's
    assert node_s is (SplitOverProcesses if processes else SplitBatch)
    assert node_w not in (SplitBatch, SplitOverProcesses)
    np.testing.assert_allclose(logits_s.data, logits_w.data, rtol=1e-5, atol=1e-6)
    assert loss_s == pytest.approx(loss_w, rel=1e-5)
    scale = max(np.abs(g).max() for g in grads_w)
    for got, want in zip(grads_s, grads_w):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


def test_the_slices_run_on_two_threads(rng, monkeypatch):
    seen = set()
    forward = parallel._forward_slice

    def spy(model, x):
        seen.add(threading.get_ident())
        return forward(model, x)

    monkeypatch.setattr(parallel, "_forward_slice", spy)
    model = accelerate(gpt(), workers=2, processes=False)
    loss_and_grads(model, rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8)))
    assert len(seen) == 2


def test_no_split_without_a_graph_one_row_or_inside_data_parallel(rng):
    model = accelerate(gpt(), workers=2)
    x = rng.integers(0, 17, (4, 8))
    with no_grad():
        assert model(Tensor(x))._ctx is None  # generation and evaluation run whole
    assert not isinstance(model(Tensor(x[:1]))._ctx, (SplitBatch, SplitOverProcesses))
    made = []
    runner = DataParallel(model, 2)

    def loss_fn(logits, y):
        made.append(type(logits._ctx))
        return cross_entropy(logits, y)

    runner.backward(loss_fn, x, x)
    assert len(made) == 2 and SplitBatch not in made  # DataParallel's slices split no further


def test_plain_and_workers_1_remove_the_split(rng):
    x = rng.integers(0, 17, (4, 8))
    model = accelerate(gpt(), workers=2)
    assert "forward" in vars(model) and model.split_workers == 2
    plain(model)
    assert "forward" not in vars(model) and "split_workers" not in vars(model)
    accelerate(model)  # the default: one worker per core, at most 4
    assert getattr(model, "split_workers", 1) == default_workers()
    accelerate(model, workers=1)
    assert "forward" not in vars(model)
    assert not isinstance(model(Tensor(x))._ctx, (SplitBatch, SplitOverProcesses))
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        accelerate(model, workers=0)


@pytest.mark.parametrize("processes", [False, True])
def test_the_split_leaves_numpys_blas_at_one_thread(rng, processes):
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        model = accelerate(gpt(), workers=2, processes=processes)
        loss_and_grads(model, rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8)))
        info = threadpoolctl.threadpool_info()
        blas = [i["num_threads"] for i in info if i["user_api"] == "blas"]
        assert blas and all(n == 1 for n in blas)


def test_a_threaded_adamw_step_equals_the_one_thread_step(rng, monkeypatch):
    module = importlib.import_module("tinytorch.accel.adamw")
    monkeypatch.setattr(module.FastAdam, "THREADED_VALUES", 1)
    threads = set()
    update = module._update_group

    def spy(optimizer, jobs):
        threads.add(threading.get_ident())
        return update(optimizer, jobs)

    monkeypatch.setattr(module, "_update_group", spy)
    x, y = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
    params = []
    for workers in (1, 2):
        model = accelerate(gpt(), workers=1)
        opt = accelerate(AdamW(model.parameters(), lr=1e-2, weight_decay=0.1), workers=workers)
        for step in range(3):
            opt.lr = 1e-2 / (step + 1)  # a schedule: every thread takes this step's rate
            opt.zero_grad()
            cross_entropy(model(Tensor(x)), y).backward()
            opt.step()
        params.append([p.data.copy() for p in model.parameters()])
    assert len(threads) == 2
    for a, b in zip(*params):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("size", [1, 5, 255, 256, 1000, 7 * 256 - 100])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_the_optimizers_shares_hold_as_many_values_each_not_as_many_blocks(
    size, count, monkeypatch
):
    from tinytorch.accel import adamw, blocking

    monkeypatch.setattr(blocking, "BLOCK", 256)
    shares = adamw._shares(size, count)
    assert len(shares) == count
    flat = [part for share in shares for part in share]
    assert [p.start for p in flat] == [0] + [p.stop for p in flat[:-1]]  # in order, no gap
    assert flat[-1].stop == size and all(0 < p.stop - p.start <= 256 for p in flat)
    values = [sum(p.stop - p.start for p in share) for share in shares]
    assert max(values) - min(values) <= adamw.SHARE_ALIGN * 2  # not 4 blocks against 3 short ones
    assert all(share[0].start % adamw.SHARE_ALIGN == 0 for share in shares if share)
