"""DataParallel: a batch split over threads, or over forked worker processes that share the
weights (processes=True), gives the full batch's loss and gradients."""

import threading

import numpy as np
import pytest

from tinytorch.accel.parallel import DataParallel
from tinytorch.core.activations import Tanh
from tinytorch.core.layers import Dropout, Linear, Module
from tinytorch.core.losses import CrossEntropyLoss, MSELoss
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.core.training import seed_everything

mse, xent = MSELoss(), CrossEntropyLoss()


class Net(Module):
    """Two layers, the first used twice (a shared weight, like a tied embedding)."""

    def __init__(self, width=6, classes=3):
        self.inp, self.act, self.mid = Linear(4, width), Tanh(), Linear(width, width)
        self.back, self.out = Linear(width, 4), Linear(width, classes)

    def forward(self, x):
        h = self.act(self.mid(self.act(self.inp(x))))
        return self.out(self.act(self.inp(self.back(h))))  # inp again: shared weights


def grads_of(model):
    return [None if p.grad is None else p.grad.copy() for p in model.parameters()]


def plain(model, loss_fn, x, y):
    for p in model.parameters():
        p.grad = None
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss.item(), grads_of(model)


def split(model, loss_fn, x, y, workers, processes=False):
    for p in model.parameters():
        p.grad = None
    loss = DataParallel(model, workers, processes).backward(loss_fn, x, y)
    return loss, grads_of(model)


@pytest.mark.parametrize("rows, workers", [(8, 2), (7, 3), (5, 4), (1, 2), (6, 1)])
@pytest.mark.parametrize("processes", [False, True])
def test_split_equals_the_whole_batch(rows, workers, rng, processes):
    seed_everything(0)
    model = Net()
    x = rng.normal(size=(rows, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=rows)
    want_loss, want = plain(model, xent, x, y)
    got_loss, got = split(model, xent, x, y, workers, processes)
    assert got_loss == pytest.approx(want_loss, rel=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("processes", [False, True])
def test_sequence_targets_and_tensor_inputs(rng, processes):
    """(B, T, C) inputs with (B, T, 1) targets, passed as Tensors: the rows are the first axis."""
    seed_everything(1)
    model = Net(classes=1)
    x = Tensor(rng.normal(size=(6, 5, 4)))
    y = Tensor(rng.normal(size=(6, 5, 1)))
    want_loss, want = plain(model, mse, x, y)
    got_loss, got = split(model, mse, x, y, 3, processes)
    assert got_loss == pytest.approx(want_loss, rel=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("processes", [False, True])
def test_training_matches_and_copies_follow_the_weights(rng, processes):
    """Five AdamW steps each way end at the same weights: every step's copies see the update,
    including weights whose arrays were replaced between steps."""
    x = rng.normal(size=(10, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=10)
    finals = []
    for workers in (1, 2):
        seed_everything(0)
        model = Net()
        opt, dp = AdamW(model.parameters(), lr=0.05), DataParallel(model, workers, processes)
        for step in range(5):
            if step == 3:  # new arrays, not in place: the copies must pick them up
                for p in model.parameters():
                    p.data = p.data * 0.5
            opt.zero_grad()
            dp.backward(xent, x, y)
            opt.step()
        finals.append([p.data.copy() for p in model.parameters()])
    for a, b in zip(*finals):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("processes", [False, True])
def test_gradients_accumulate_like_backward(rng, processes):
    """Without zero_grad, a second call adds to .grad, as a second loss.backward() would."""
    seed_everything(0)
    model = Net()
    x, y = rng.normal(size=(4, 4)).astype(np.float32), rng.integers(0, 3, size=4)
    _, once = split(model, xent, x, y, 2, processes)
    DataParallel(model, 2, processes).backward(xent, x, y)
    for g, w in zip(grads_of(model), once):
        np.testing.assert_allclose(g, 2 * w, rtol=1e-5, atol=1e-7)


def test_slices_run_at_the_same_time_on_separate_threads(rng):
    """Each slice waits at a barrier for the other two: it passes only if all three run at once."""
    seed_everything(0)
    model, seen, barrier = Net(), set(), threading.Barrier(3, timeout=20)

    def loss_fn(out, y):
        seen.add(threading.get_ident())
        barrier.wait()
        return xent(out, y)

    dp = DataParallel(model, 3)
    x, y = rng.normal(size=(9, 4)).astype(np.float32), rng.integers(0, 3, size=9)
    dp.backward(loss_fn, x, y)
    assert len(seen) == 3 and threading.get_ident() in seen


def test_an_error_in_a_worker_reaches_the_caller(rng):
    model = Net()
    x, y = rng.normal(size=(4, 4)).astype(np.float32), rng.integers(0, 3, size=4)
    main = threading.get_ident()

    def loss_fn(out, y):
        if threading.get_ident() != main:
            raise RuntimeError("worker failed")
        return xent(out, y)

    with pytest.raises(RuntimeError, match="worker failed"):
        DataParallel(model, 2).backward(loss_fn, x, y)


def test_refusals_are_one_line():
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        DataParallel(Net(), 0)
    with pytest.raises(TypeError, match="needs a Module"):
        DataParallel(lambda x: x, 2)
    with pytest.raises(ShapeError, match="inputs have 4 rows but targets have 3"):
        DataParallel(Net(), 2).backward(xent, np.zeros((4, 4)), np.zeros(3, dtype=int))


def test_active_dropout_is_refused_and_eval_mode_is_not(rng):
    class Dropped(Net):
        def __init__(self):
            super().__init__()
            self.drop = Dropout(0.5)

        def forward(self, x):
            return super().forward(self.drop(x))

    model = Dropped()
    x, y = rng.normal(size=(4, 4)).astype(np.float32), rng.integers(0, 3, size=4)
    with pytest.raises(ValueError, match=r"active Dropout\(p=0.5\).*use workers=1"):
        DataParallel(model, 2).backward(xent, x, y)
    model.eval()
    want_loss, want = plain(model, xent, x, y)
    got_loss, got = split(model, xent, x, y, 2)
    assert got_loss == pytest.approx(want_loss, rel=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("processes", [False, True])
def test_a_replaced_module_is_copied_afresh(rng, processes):
    """Swapping a layer (no parameter changes) must reach the copies, not train the old one."""
    from tinytorch.core.activations import ReLU

    seed_everything(0)
    model, x = Net(), rng.normal(size=(6, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=6)
    dp = DataParallel(model, 2, processes)
    split(model, xent, x, y, 2, processes)
    dp.backward(xent, x, y)  # copies (or a worker) made with Tanh
    model.act = ReLU()
    want_loss, want = plain(model, xent, x, y)
    for p in model.parameters():
        p.grad = None
    assert dp.backward(xent, x, y) == pytest.approx(want_loss, rel=1e-5)
    for g, w in zip(grads_of(model), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("processes", [False, True])
def test_layers_in_lists_dicts_and_namedtuples_get_their_own_gradients(rng, processes):
    """Parameters reached through containers are copied too: no two threads share a .grad."""
    from collections import namedtuple

    Pair = namedtuple("Pair", "first second")

    class Nested(Module):
        def __init__(self):
            self.stack = [Linear(4, 5), Linear(5, 5)]
            self.heads = {"out": Linear(5, 3)}
            self.pair = Pair(Tanh(), Linear(5, 5))

        def forward(self, x):
            h = self.pair.first(self.stack[1](self.stack[0](x)))
            return self.heads["out"](self.pair.second(h))

    seed_everything(0)
    model = Nested()
    x, y = rng.normal(size=(6, 4)).astype(np.float32), rng.integers(0, 3, size=6)
    want_loss, want = plain(model, xent, x, y)
    got_loss, got = split(model, xent, x, y, 2, processes)
    assert len(want) == 8 and got_loss == pytest.approx(want_loss, rel=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
