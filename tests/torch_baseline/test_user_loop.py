"""The user-loop benchmark (benchmarks/user_loop.py): nanoGPT's schedule, one batch plan for both
libraries, and a few steps of each library's loop in this process."""

import math

import numpy as np
import pytest

from benchmarks import user_loop


def test_the_schedule_warms_up_then_decays_to_the_floor():
    lrs = [user_loop.lr_at(step, 2000) for step in range(2001)]
    assert lrs[0] < lrs[50] < lrs[99] <= user_loop.LR  # linear warm-up
    assert max(lrs) == pytest.approx(user_loop.LR, rel=0.02)
    assert all(a >= b for a, b in zip(lrs[100:], lrs[101:]))  # then only down
    assert lrs[-1] == pytest.approx(user_loop.MIN_LR)


def test_both_libraries_see_the_same_batches():
    train = np.arange(10_000)
    first, again = user_loop.schedule(train, 5), user_loop.schedule(train, 5)
    assert first.shape == (5, user_loop.SHAPE["batch"]) and np.array_equal(first, again)
    x, y = user_loop.windows(train, first[0])
    assert x.shape == (12, 64) and np.array_equal(x[:, 1:], y[:, :-1])


@pytest.mark.parametrize("who", user_loop.WHO)
def test_each_loop_trains_and_reports(who, tmp_path):
    rng = np.random.default_rng(0)
    vocab = 20
    np.save(tmp_path / "train.npy", rng.integers(0, vocab, 5_000))
    np.save(tmp_path / "val.npy", rng.integers(0, vocab, 2_000))
    record = user_loop.child(who, tmp_path, vocab, iters=3)
    assert record["who"] == who and record["seconds"] > 0 and record["peak_mib"] >= 0
    # three small steps from GPT-2's initialisation: still about the loss of a uniform guess
    assert abs(record["val_loss"] - math.log(vocab)) < 0.3
