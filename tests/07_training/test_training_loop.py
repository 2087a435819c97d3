"""The training step learns real problems, keeps float32 and refuses to apply a nan loss."""

import random

import numpy as np
import pytest

from tinytorch.core.activations import Tanh
from tinytorch.core.layers import Linear, Module
from tinytorch.core.losses import CrossEntropyLoss, MSELoss
from tinytorch.core.optimizers import SGD, Adam, AdamW
from tinytorch.core.training import CosineSchedule, Trainer, seed_everything, train_step

mse = MSELoss()


class MLP(Module):
    def __init__(self, hidden=8):
        self.fc1, self.act, self.fc2 = Linear(2, hidden), Tanh(), Linear(hidden, 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


XOR_X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
XOR_Y = np.array([[0], [1], [1], [0]], dtype=np.float32)


def test_mlp_learns_xor_with_adam():
    seed_everything(0)
    model = MLP()
    opt = Adam(model.parameters(), lr=0.05)
    first = train_step(model, mse, opt, XOR_X, XOR_Y)
    for _ in range(300):
        last = train_step(model, mse, opt, XOR_X, XOR_Y)
    assert last < 0.01 < first
    np.testing.assert_array_equal(model(XOR_X).data > 0.5, XOR_Y > 0.5)


def test_linear_model_recovers_a_noisy_line():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(256, 1)).astype(np.float32)
    y = (2.5 * x - 0.7 + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)
    slope, intercept = np.polyfit(x[:, 0], y[:, 0], 1)  # least squares: what training should find
    seed_everything(1)
    model = Linear(1, 1)
    trainer = Trainer(model, mse, SGD(model.parameters(), lr=0.1, momentum=0.9))
    for _ in range(200):
        trainer.step(x, y)
    assert model.weight.data[0, 0] == pytest.approx(slope, abs=1e-3)
    assert model.bias.data[0] == pytest.approx(intercept, abs=1e-3)
    assert abs(slope - 2.5) < 0.05 and abs(intercept + 0.7) < 0.05
    assert trainer.step_count == 200 and trainer.history[-1] < trainer.history[0]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-4), id="SGD"),
        pytest.param(lambda ps: Adam(ps, lr=1e-2), id="Adam"),
        pytest.param(lambda ps: AdamW(ps, lr=1e-2), id="AdamW"),
    ],
)
def test_everything_stays_float32_after_a_step(make):
    seed_everything(2)
    model = MLP()
    opt = make(model.parameters())
    for _ in range(2):
        loss = train_step(model, mse, opt, XOR_X, XOR_Y, max_norm=1.0)
    assert isinstance(loss, float)
    for p in model.parameters():
        assert p.data.dtype == np.float32 and p.grad.dtype == np.float32
    arrays = [v for state in opt.state for v in state.values() if isinstance(v, np.ndarray)]
    assert arrays and all(a.dtype == np.float32 for a in arrays)


def test_train_step_returns_the_loss_before_the_update():
    seed_everything(3)
    model = MLP()
    before = float(mse(model(XOR_X), XOR_Y).data)
    returned = train_step(model, mse, SGD(model.parameters(), lr=0.1), XOR_X, XOR_Y)
    assert returned == pytest.approx(before, rel=1e-6)
    assert float(mse(model(XOR_X), XOR_Y).data) < before


def test_train_step_clips_before_stepping():
    seed_everything(4)
    model = Linear(2, 1)
    y = np.full((4, 1), 1e4, dtype=np.float32)  # a huge loss gives a huge gradient
    train_step(model, mse, SGD(model.parameters(), lr=1e-3), XOR_X, y, max_norm=0.5)
    norm = np.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2)) for p in model.parameters()))
    assert norm == pytest.approx(0.5, rel=1e-5)


def test_nan_loss_raises_and_keeps_the_weights():
    seed_everything(5)
    model = MLP()
    opt = Adam(model.parameters())
    before = [p.data.copy() for p in model.parameters()]
    bad = XOR_Y.copy()
    bad[0, 0] = np.nan
    with pytest.raises(FloatingPointError, match="loss is nan; the weights were not updated"):
        train_step(model, mse, opt, XOR_X, bad)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.data, b)


def test_trainer_follows_the_schedule():
    model = Linear(2, 1)
    opt = AdamW(model.parameters(), lr=123.0)
    schedule = CosineSchedule(1e-2, 2, 5)
    trainer = Trainer(model, mse, opt, schedule=schedule)
    seen = []
    for _ in range(6):
        trainer.step(XOR_X, XOR_Y)
        seen.append(opt.lr)
    assert seen == [schedule(s) for s in range(6)]
    assert trainer.evaluate(XOR_X, XOR_Y) == pytest.approx(float(mse(model(XOR_X), XOR_Y).data))
    assert model.training


def test_seed_everything_reproduces_init_and_random():
    seed_everything(7)
    a, ra = Linear(4, 3), random.random()
    seed_everything(7)
    b, rb = Linear(4, 3), random.random()
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert ra == rb
    with pytest.raises(ValueError, match="seed must be an integer"):
        seed_everything(-1)


def test_classifier_trains_with_cross_entropy_and_clipping():
    rng = np.random.default_rng(8)
    centers = np.array([[2, 0], [-2, 0], [0, 2]], dtype=np.float32)
    labels = rng.integers(0, 3, size=120)
    x = (centers[labels] + 0.3 * rng.standard_normal((120, 2))).astype(np.float32)
    seed_everything(8)
    model = Linear(2, 3)
    trainer = Trainer(
        model,
        CrossEntropyLoss(),
        AdamW(model.parameters(), lr=0.1),
        CosineSchedule(0.1, 5, 60),
        1.0,
    )
    for _ in range(60):
        trainer.step(x, labels)
    accuracy = np.mean(model(x).data.argmax(axis=-1) == labels)
    assert accuracy > 0.95 and trainer.history[-1] < 0.3 * trainer.history[0]


def test_a_step_can_take_its_forward_and_backward_from_elsewhere():
    """`backward(loss_fn, x, y)` stands in for forward and backward; zeroing, the nan check,
    clipping and the step stay the Trainer's."""
    seed_everything(9)
    plain, other = MLP(), MLP()
    other.load_state_dict(plain.state_dict())
    calls = []

    def backward(loss_fn, x, y):
        calls.append(len(x))
        assert all(p.grad is None for p in other.parameters())  # zeroed before it runs
        loss = loss_fn(other(x), y)
        loss.backward()
        return loss.item()

    mine = Trainer(plain, mse, Adam(plain.parameters(), lr=0.05), max_norm=0.5)
    theirs = Trainer(other, mse, Adam(other.parameters(), lr=0.05), max_norm=0.5, backward=backward)
    for _ in range(5):
        assert theirs.step(XOR_X, XOR_Y) == mine.step(XOR_X, XOR_Y)
    assert calls == [4] * 5
    for p, q in zip(plain.parameters(), other.parameters()):
        np.testing.assert_array_equal(p.data, q.data)
    before = [p.data.copy() for p in other.parameters()]
    with pytest.raises(FloatingPointError, match="loss is nan"):
        train_step(other, mse, theirs.optimizer, XOR_X, XOR_Y, backward=lambda *a: float("nan"))
    for p, b in zip(other.parameters(), before):
        np.testing.assert_array_equal(p.data, b)
