"""`tito milestone run mlp`: a multi-layer perceptron trained by backpropagation reads digits.

The data are module 08's `DigitsDataset`: 1,797 handwritten digits of 8x8 pixels, a fixed split
of 1,437 for training and 360 for the test. The network sees each image as a row of 64 numbers,
with no idea which pixels are neighbours. `fit` (shared with the cnn milestone) trains any
classifier on the digits with one recipe: Adam, a cosine schedule, shuffled batches of 32.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from rich.progress import track

from milestones import history
from milestones.registry import Milestone, RunOptions
from tinytorch.core.activations import ReLU
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import CosineSchedule, Trainer, seed_everything
from tinytorch.data.loader import DataLoader, DigitsDataset

STORY = (
    "In 1986 David Rumelhart, Geoffrey Hinton and Ronald Williams showed in Nature that "
    "propagating errors backwards through hidden layers trains them to find useful features of "
    "their own. Within three years, networks trained this way were reading handwritten zip codes "
    "for the US Postal Service. Here a network with one hidden layer of 128 units learns 1,437 "
    "handwritten digits and is tested on 360 it never saw."
)
HIDDEN = 128
TARGET = 0.95  # the test accuracy this milestone must reach


@dataclass(frozen=True)
class Recipe:
    epochs: int
    lr: float = 3e-3
    batch_size: int = 32


FULL, QUICK = Recipe(20), Recipe(10)


def build_mlp() -> Sequential:
    return Sequential(Linear(64, HIDDEN), ReLU(), Linear(HIDDEN, 10))


def predict(model, images: np.ndarray, batch: int = 512) -> np.ndarray:
    """The most likely class of each image, in eval mode, without a graph."""
    model.eval()
    with no_grad():
        found = [model(Tensor(images[i : i + batch])).data.argmax(axis=-1)
                 for i in range(0, len(images), batch)]  # fmt: skip
    model.train()
    return np.concatenate(found)


def fit(model, flatten: bool, recipe: Recipe, seed: int, opts: RunOptions, label: str) -> dict:
    """Train `model` on the digits; per-epoch loss and test accuracy, time, final figures."""
    train, test = DigitsDataset("train", flatten=flatten), DigitsDataset("test", flatten=flatten)
    loader = DataLoader(train, batch_size=recipe.batch_size, shuffle=True, seed=seed,
                        as_numpy=True)  # fmt: skip
    optimizer = Adam(model.parameters(), lr=recipe.lr)
    total = recipe.epochs * len(loader)
    schedule = CosineSchedule(recipe.lr, 0, total, min_lr=recipe.lr / 30)
    trainer = Trainer(model, cross_entropy, optimizer, schedule)
    test_x, test_y = test.arrays
    losses, accuracies, seconds = [], [], 0.0
    for _ in track(range(recipe.epochs), description=f"training the {label}", console=opts.console):
        began, epoch_loss = time.perf_counter(), 0.0
        for x, y in loader:
            epoch_loss += trainer.step(Tensor(x), y) / len(loader)
        seconds += time.perf_counter() - began
        losses.append(epoch_loss)
        accuracies.append(float((predict(model, test_x) == test_y).mean()))
    predicted = predict(model, test_x)
    return {
        "parameters": model.num_parameters(),
        "epochs": recipe.epochs,
        "train_seconds": seconds,
        "train_loss": losses,
        "test_accuracy_per_epoch": accuracies,
        "test_accuracy": float((predicted == test_y).mean()),
        "test_images": len(test_y),
        "wrong": [int(i) for i in np.flatnonzero(predicted != test_y)],
        "predicted": predicted,
    }


PITCH = 12  # pixels from one tile of the wrong digits to the next: 8 of digit, 4 for its label


def plot(result: dict, path, title: str):
    """Left: loss and test accuracy per epoch. Right: test digits it got wrong."""
    return history.save_figure(figure(result, title), path)


def figure(result: dict, title: str):
    fig, (left, right) = history.figure(1, 2, figsize=(10, 4), layout="constrained")
    epochs = np.arange(1, result["epochs"] + 1)
    left.plot(epochs, result["train_loss"], "o-", color="tab:blue", label="train loss")
    left.set(xlabel="epoch", ylabel="cross-entropy", title=title)
    twin = left.twinx()
    twin.plot(epochs, result["test_accuracy_per_epoch"], "s-", color="tab:green",
              label="test accuracy")  # fmt: skip
    twin.set(ylabel="test accuracy", ylim=(min(0.8, *result["test_accuracy_per_epoch"]), 1.0))
    left.legend(loc="center right", fontsize=8)
    twin.legend(loc="lower right", fontsize=8)
    images, labels = DigitsDataset("test").arrays
    wrong = result["wrong"][:12]
    gap = PITCH - 8  # the band above each tile that holds its label, inside the image
    tiles = np.ones((3 * PITCH, 4 * PITCH))
    for k, i in enumerate(wrong):
        r, c = divmod(k, 4)
        top, side = r * PITCH + gap, c * PITCH + gap // 2
        tiles[top : top + 8, side : side + 8] = 1 - images[i, 0]
        right.text(side + 3.5, top - gap / 2, f"{labels[i]} read as {result['predicted'][i]}",
                   ha="center", va="center", fontsize=7, color="tab:red")  # fmt: skip
    right.imshow(tiles, cmap="gray", vmin=0, vmax=1)
    right.set_axis_off()
    more = f" (first {len(wrong)})" if len(result["wrong"]) > len(wrong) else ""
    right.set_title(f"{len(result['wrong'])} of {result['test_images']} test digits wrong{more}")
    return fig


def public(result: dict) -> dict:
    """The JSON part of a result (the predictions are an array)."""
    return {k: v for k, v in result.items() if k != "predicted"}


def refuse(opts: RunOptions, name: str) -> None:
    opts.refuse(
        name,
        {
            "--data": "trains on the digits that ship in data/",
            "--resume": "keeps no checkpoint",
            "--tokenizer": "reads no text",
            "--config": "has one network",
            "--steps": "trains for a fixed number of epochs (--quick for fewer)",
        },
    )


def run(milestone: Milestone, opts: RunOptions) -> dict:
    refuse(opts, "mlp")
    seed = opts.seed or 0
    history.prepare_out(opts.out)
    history.header(milestone, opts, "backpropagation reads digits", STORY)
    seed_everything(seed)
    model = build_mlp()
    result = fit(model, True, QUICK if opts.quick else FULL, seed, opts, "MLP")
    png = plot(result, opts.out / "mlp.png", f"MLP 64-{HIDDEN}-10 on the digits")
    summary = {
        "milestone": "mlp",
        "year": milestone.year,
        "network": f"Linear(64, {HIDDEN}) ReLU Linear({HIDDEN}, 10)",
        **public(result),
        "target": TARGET,
        "reached_target": result["test_accuracy"] >= TARGET,
        "files": [png.name, "summary.json"],
    }
    history.write_json(opts.out / "summary.json", summary)
    history.results(
        opts,
        f"handwritten digits, {result['test_images']} test images",
        [("MLP", f"{result['parameters']:,}", str(result["epochs"]),
          f"{result['test_accuracy']:.1%}", f"{result['train_seconds']:.1f} s")],
        ("network", "parameters", "epochs", "test accuracy", "train time"),
    )  # fmt: skip
    return summary
