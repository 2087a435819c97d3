"""`tito milestone run cnn`: a LeNet-style convolutional network against the MLP, on the digits.

Both networks are trained by the mlp milestone's `fit`, with the same recipe, seed and split;
the convolutional one sees images `(1, 8, 8)` instead of rows of 64 numbers. Its filters are
shared over every position, so it needs fewer weights than the MLP and still reads the digits
better. The run draws the first layer's filters and what they make of one test digit.
"""

from __future__ import annotations

import numpy as np

from milestones import history, mlp
from milestones.registry import Milestone, RunOptions
from tinytorch.core.activations import ReLU
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.spatial import BatchNorm2d, Conv2d, Flatten, MaxPool2d
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import seed_everything
from tinytorch.data.loader import DigitsDataset

STORY = (
    "In 1998 Yann LeCun, Leon Bottou, Yoshua Bengio and Patrick Haffner described LeNet-5 in "
    "'Gradient-based learning applied to document recognition': small filters slid over the "
    "whole image share their weights, pooling makes the features tolerate small shifts, and the "
    "network, trained end to end by backpropagation, read handwritten digits and bank cheques "
    "better than any method before it. Here a small network of the same kind meets the MLP."
)
CHANNELS = (16, 32)
FULL, QUICK = mlp.Recipe(20), mlp.Recipe(8)


def build_cnn() -> Sequential:
    """conv 3x3 -> norm -> ReLU -> pool, twice, then one Linear: (1, 8, 8) -> 10 classes."""
    a, b = CHANNELS
    return Sequential(
        Conv2d(1, a, 3, padding=1), BatchNorm2d(a), ReLU(), MaxPool2d(2),  # (a, 4, 4)
        Conv2d(a, b, 3, padding=1), BatchNorm2d(b), ReLU(), MaxPool2d(2),  # (b, 2, 2)
        Flatten(), Linear(b * 2 * 2, 10),
    )  # fmt: skip


def plot(model: Sequential, results: dict, path):
    """Top: the first layer's filters. Middle: their responses to one test digit. Bottom: test
    accuracy of both networks per epoch."""
    import matplotlib.gridspec as gridspec

    first = model[0]
    filters = first.weight.data[:, 0]  # (a, 3, 3)
    image = DigitsDataset("test").arrays[0][:1]
    model.eval()
    with no_grad():
        maps = first(Tensor(image)).data[0]  # (a, 8, 8)
    model.train()
    count = len(filters)
    fig, _ = history.figure(figsize=(12, 6.5))
    fig.clf()
    grid = gridspec.GridSpec(3, count + 1, figure=fig, height_ratios=(1, 1, 2.2))
    bound = np.abs(filters).max()
    ax = fig.add_subplot(grid[1, 0])
    ax.imshow(image[0, 0], cmap="gray_r")
    ax.set_title("input", fontsize=8)
    ax.set_axis_off()
    for k in range(count):
        ax = fig.add_subplot(grid[0, k + 1])
        ax.imshow(filters[k], cmap="RdBu_r", vmin=-bound, vmax=bound)
        ax.set_title(f"filter {k}", fontsize=7)
        ax.set_axis_off()
        ax = fig.add_subplot(grid[1, k + 1])
        ax.imshow(maps[k], cmap="viridis")
        ax.set_axis_off()
    curves = fig.add_subplot(grid[2, :])
    for name, result in results.items():
        epochs = np.arange(1, result["epochs"] + 1)
        curves.plot(epochs, result["test_accuracy_per_epoch"], "o-",
                    label=f"{name}: {result['parameters']:,} parameters")  # fmt: skip
    lowest = min(min(r["test_accuracy_per_epoch"]) for r in results.values())
    curves.set(xlabel="epoch", ylabel="test accuracy", ylim=(min(0.9, lowest - 0.01), 1.0))
    curves.legend(loc="lower right")
    fig.suptitle("first-layer filters (red +, blue -), their maps of one test digit, accuracy")
    fig.tight_layout()
    return history.save_figure(fig, path)


def run(milestone: Milestone, opts: RunOptions) -> dict:
    mlp.refuse(opts, "cnn")
    seed = opts.seed or 0
    recipe = QUICK if opts.quick else FULL
    history.prepare_out(opts.out)
    history.header(milestone, opts, "convolutional networks read digits", STORY)
    seed_everything(seed)
    cnn = build_cnn()
    results = {"CNN": mlp.fit(cnn, False, recipe, seed, opts, "CNN")}
    seed_everything(seed)
    results["MLP"] = mlp.fit(mlp.build_mlp(), True, recipe, seed, opts, "MLP")
    png = plot(cnn, results, opts.out / "cnn.png")
    ours, theirs = results["CNN"], results["MLP"]
    summary = {
        "milestone": "cnn",
        "year": milestone.year,
        "network": repr(cnn.layers),
        "cnn": mlp.public(ours),
        "mlp": mlp.public(theirs),
        "more_accurate_than_mlp": ours["test_accuracy"] > theirs["test_accuracy"],
        "fewer_parameters_than_mlp": ours["parameters"] < theirs["parameters"],
        "first_layer_filters": cnn[0].weight.data[:, 0].round(4).tolist(),
        "files": [png.name, "summary.json"],
    }
    history.write_json(opts.out / "summary.json", summary)
    history.results(
        opts,
        f"handwritten digits, {ours['test_images']} test images, same recipe for both",
        [(name, f"{r['parameters']:,}", str(r["epochs"]), f"{r['test_accuracy']:.1%}",
          str(len(r["wrong"])), f"{r['train_seconds']:.1f} s") for name, r in results.items()],
        ("network", "parameters", "epochs", "test accuracy", "wrong", "train time"),
    )  # fmt: skip
    return summary
