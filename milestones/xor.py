"""`tito milestone run xor`: the problem one layer cannot solve, and the hidden layer that can.

XOR labels the corners (0, 0) and (1, 1) as 0, and (0, 1) and (1, 0) as 1. A single layer draws
one straight boundary, and no line puts the two diagonals on different sides: at best it gets
three corners of four right. Both networks here are trained the same way, by gradient descent on
the cross-entropy (modules 04-06), on noisy copies of the four corners; only the second has a
hidden layer.
"""

from __future__ import annotations

import time

import numpy as np

from milestones import history
from milestones.registry import Milestone, RunOptions
from tinytorch.core.activations import Tanh
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam
from tinytorch.core.tensor import Tensor

STORY = (
    "In 1969 Marvin Minsky and Seymour Papert's book Perceptrons proved what a single layer of "
    "threshold units cannot compute; the simplest case is XOR, true when exactly one input is. "
    "Interest and funding for neural networks fell away for more than a decade. A hidden layer "
    "solves it, given a way to train the weights feeding it: backpropagation, which the next "
    "milestone's paper (1986) made standard. Here both are trained the same way."
)
CORNERS = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
LABELS = np.array([0, 1, 1, 0])
NOISE = 0.12  # standard deviation of the points around each corner
HIDDEN = 8
BEST_LINE = 0.75  # the most a straight boundary can get right on the four corners


def points(rng: np.random.Generator, per_corner: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.repeat(CORNERS, per_corner, axis=0) + rng.normal(0, NOISE, (4 * per_corner, 2))
    return x.astype(np.float32), np.repeat(LABELS, per_corner)


def train(model, x: np.ndarray, y: np.ndarray, steps: int) -> list[float]:
    """Full-batch Adam on the cross-entropy; the loss of every step."""
    # written out, not module 07's Trainer: xor requires modules 01-06 only (registry.py)
    optimizer = Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        loss = cross_entropy(model(Tensor(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.data))
    return losses


def predict(model, x: np.ndarray) -> np.ndarray:
    with no_grad():
        return model(Tensor(x)).data.argmax(axis=-1)


def plot(models: dict, x: np.ndarray, y: np.ndarray, path):
    """Each network's decision regions over the points."""
    fig, axes = history.figure(1, len(models), figsize=(5 * len(models), 4.6))
    g = np.linspace(-0.5, 1.5, 161, dtype=np.float32)
    gx, gy = np.meshgrid(g, g)
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
    for ax, (title, model) in zip(axes, models.items()):
        regions = predict(model, grid).reshape(gx.shape)
        ax.contourf(gx, gy, regions, levels=[-0.5, 0.5, 1.5], colors=["#f4c7c3", "#c6dbef"])
        ax.scatter(*x[y == 0].T, marker="x", color="tab:red", s=12, label="XOR = 0")
        ax.scatter(*x[y == 1].T, marker="o", color="tab:blue", s=12, label="XOR = 1")
        ax.set(title=title, xlim=(-0.5, 1.5), ylim=(-0.5, 1.5))
        ax.set_aspect("equal")
    axes[0].legend(fontsize=7, loc="center")
    return history.save_figure(fig, path)


def run(milestone: Milestone, opts: RunOptions) -> dict:
    opts.refuse(
        "xor",
        {
            "--data": "draws its own points",
            "--resume": "keeps no checkpoint",
            "--tokenizer": "reads no text",
            "--config": "has two fixed networks",
        },
    )
    seed = opts.seed or 0
    steps = opts.steps or (150 if opts.quick else 600)
    history.prepare_out(opts.out)
    history.header(milestone, opts, "the XOR problem", STORY)
    rng = np.random.default_rng(seed)
    train_x, train_y = points(rng, 25 if opts.quick else 100)
    test_x, test_y = points(rng, 100)
    np.random.seed(seed)
    networks = {
        "one layer": Linear(2, 2),
        "two layers": Sequential(Linear(2, HIDDEN), Tanh(), Linear(HIDDEN, 2)),
    }
    rows, found = [], {}
    for name, model in networks.items():
        began = time.perf_counter()
        losses = train(model, train_x, train_y, steps)
        seconds = time.perf_counter() - began
        accuracy = float((predict(model, test_x) == test_y).mean())
        corners = float((predict(model, CORNERS) == LABELS).mean())
        found[name] = {
            "parameters": model.num_parameters(),
            "final_loss": losses[-1],
            "test_accuracy": accuracy,
            "corner_accuracy": corners,
            "seconds": seconds,
        }
        rows.append((name, str(model.num_parameters()), f"{losses[-1]:.3f}", f"{accuracy:.1%}",
                     f"{corners:.0%}", f"{seconds:.1f} s"))  # fmt: skip
    png = plot(networks, test_x, test_y, opts.out / "boundaries.png")
    single, double = found.values()
    summary = {
        "milestone": "xor",
        "year": milestone.year,
        "steps": steps,
        "train_points": len(train_x),
        "test_points": len(test_x),
        "best_line_accuracy": BEST_LINE,
        "one_layer": single,
        "two_layers": double,
        "files": [png.name, "summary.json"],
    }
    history.write_json(opts.out / "summary.json", summary)
    history.results(
        opts,
        f"XOR, {len(test_x)} unseen noisy points",
        rows,
        ("network", "parameters", "final loss", "test accuracy", "corners", "time"),
    )
    opts.console.print(
        f"one layer: stuck at {single['test_accuracy']:.0%} (a line gets at most "
        f"{BEST_LINE:.0%} of the corners); with a hidden layer: {double['test_accuracy']:.0%}",
        soft_wrap=False,
    )
    return summary
