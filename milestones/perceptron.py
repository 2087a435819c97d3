"""`tito milestone run perceptron`: Rosenblatt's learning rule on points a line can separate.

The perceptron is module 03's `Linear(2, 1)` followed by a threshold: it says +1 when
`x @ w + b > 0`, else -1. No gradient is involved: each point it gets wrong moves the weights
toward it, `w += y * x`, `b += y`. When a separating line exists, the rule stops after a finite
number of mistakes (Novikoff, 1962); the run checks that it did.
"""

from __future__ import annotations

import time

import numpy as np

from milestones import history
from milestones.registry import Milestone, RunOptions
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor

STORY = (
    "In 1957 Frank Rosenblatt, at the Cornell Aeronautical Laboratory, described the perceptron: "
    "a weighted sum of its inputs and a threshold, whose weights move toward every example it "
    "gets wrong. Built in hardware as the Mark I, it learned to tell simple shapes apart. The "
    "rule provably finds a separating line whenever one exists; this run watches it do so."
)
MARGIN = 0.1  # no point lies closer than this to the true line
MAX_EPOCHS = 100


def points(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`count` points in [-1, 1]^2 labelled +-1 by a random line, none within MARGIN of it."""
    angle = rng.uniform(0, 2 * np.pi)
    normal = np.array([np.cos(angle), np.sin(angle)])
    offset = rng.uniform(-0.3, 0.3)
    x = np.empty((0, 2))
    while len(x) < count:
        draw = rng.uniform(-1, 1, size=(2 * count, 2))
        x = np.concatenate([x, draw[np.abs(draw @ normal + offset) >= MARGIN]])
    x = x[:count]
    return x.astype(np.float32), np.where(x @ normal + offset > 0, 1, -1), np.append(normal, offset)


def predict(layer: Linear, x: np.ndarray) -> np.ndarray:
    """+1 or -1 per point: the sign of the layer's output."""
    return np.where(layer(Tensor(x)).data[:, 0] > 0, 1, -1)


def train(layer: Linear, x: np.ndarray, y: np.ndarray, rng: np.random.Generator):
    """Rosenblatt's rule, one shuffled pass per epoch, until an epoch makes no mistake.

    Returns the mistakes of each epoch and the line (w1, w2, b) after each epoch.
    """
    # Rosenblatt's rule, no gradient: not module 07's Trainer (perceptron requires modules 01-03)
    w, b = layer.weight.data, layer.bias.data  # updated in place: (2, 1) and (1,)
    mistakes, lines = [], [np.append(w[:, 0], b).copy()]
    for _ in range(MAX_EPOCHS):
        wrong = 0
        for i in rng.permutation(len(x)):
            if predict(layer, x[i : i + 1])[0] != y[i]:
                w[:, 0] += y[i] * x[i]
                b += y[i]
                wrong += 1
        mistakes.append(wrong)
        lines.append(np.append(w[:, 0], b).copy())
        if wrong == 0:
            break
    return mistakes, lines


def _label(epoch: int) -> str:
    return "start" if epoch == 0 else f"after epoch {epoch}"


def plot(x, y, lines, path):
    """The points and the boundary after several epochs, the last one solid."""
    return history.save_figure(figure(x, y, lines), path)


def figure(x, y, lines):
    """The legend stands beside the square of points, so it hides none of them."""
    fig, ax = history.figure(figsize=(7.5, 5), layout="constrained")
    ax.scatter(*x[y > 0].T, marker="o", color="tab:blue", s=18, label="+1")
    ax.scatter(*x[y < 0].T, marker="x", color="tab:red", s=18, label="-1")
    shown = sorted({0, 1, 2, len(lines) // 2, len(lines) - 1})
    grid = np.linspace(-1, 1, 2)
    for rank, k in enumerate(shown):
        w1, w2, b = lines[k]
        last = k == len(lines) - 1
        style = {"color": "black" if last else "gray", "alpha": 1.0 if last else 0.3 + 0.15 * rank}
        if abs(w2) > 1e-9:
            ax.plot(grid, -(w1 * grid + b) / w2, "-" if last else "--", **style, label=_label(k))
        elif abs(w1) > 1e-9:
            ax.axvline(-b / w1, linestyle="-" if last else "--", **style, label=_label(k))
    ax.set(xlim=(-1, 1), ylim=(-1, 1), title="the perceptron's boundary, epoch by epoch")
    ax.set_aspect("equal")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig


def run(milestone: Milestone, opts: RunOptions) -> dict:
    opts.refuse(
        "perceptron",
        {
            "--data": "draws its own points",
            "--resume": "keeps no checkpoint",
            "--tokenizer": "reads no text",
            "--config": "has one model",
            "--steps": "trains until an epoch makes no mistake",
        },
    )
    seed = opts.seed or 0
    history.prepare_out(opts.out)
    history.header(milestone, opts, "the perceptron", STORY)
    rng = np.random.default_rng(seed)
    x, y, truth = points(rng, 40 if opts.quick else 200)
    np.random.seed(seed)
    layer = Linear(2, 1)
    began = time.perf_counter()
    mistakes, lines = train(layer, x, y, rng)
    seconds = time.perf_counter() - began
    accuracy = float((predict(layer, x) == y).mean())
    png = plot(x, y, lines, opts.out / "boundary.png")
    summary = {
        "milestone": "perceptron",
        "year": milestone.year,
        "points": len(x),
        "margin": MARGIN,
        "converged": mistakes[-1] == 0,
        "epochs": len(mistakes),
        "mistakes_per_epoch": mistakes,
        "total_mistakes": int(sum(mistakes)),
        "accuracy": accuracy,
        "line": [float(v) for v in lines[-1]],
        "true_line": [float(v) for v in truth],
        "seconds": seconds,
        "parameters": layer.num_parameters(),
        "files": [png.name, "summary.json"],
    }
    history.write_json(opts.out / "summary.json", summary)
    verdict = "converged" if summary["converged"] else f"not converged in {MAX_EPOCHS} epochs"
    history.results(
        opts,
        f"{len(x)} points a line can separate (margin {MARGIN})",
        [(verdict, str(len(mistakes)), str(sum(mistakes)), f"{accuracy:.0%}", f"{seconds:.2f} s")],
        ("rule", "epochs", "mistakes", "accuracy", "time"),
    )
    return summary
