"""`tito milestone run attention`: learn to reverse a sequence of digits.

Reversal needs attention: the token written at output position i is the input token at position
n-1-i, so each position must read a different, content-independent place in the past. A model that
mixes no information across positions (embeddings and MLPs alone) is stuck at chance, 10%.
The sequence is `d1 .. dn SEP dn .. d1`; the loss counts only the reversed half.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from rich.progress import track
from rich.table import Table

from milestones import plots
from milestones.history import code_line
from milestones.output import prepare_out, write_json
from milestones.registry import Milestone, RunOptions
from tinytorch.core.autograd import no_grad
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import CosineSchedule, Trainer, seed_everything
from tinytorch.models.transformer import GPT

DIGITS, LENGTH = 10, 6
SEP = DIGITS  # the separator is token 10
IGNORE = -1  # target value for positions the loss does not count


def sequences(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (count, 2n) and targets; only the reversed digits are counted, the rest IGNORE."""
    digits = rng.integers(0, DIGITS, size=(count, LENGTH))
    sep = np.full((count, 1), SEP)
    full = np.concatenate([digits, sep, digits[:, ::-1]], axis=1)  # (count, 2n + 1)
    x, y = full[:, :-1], full[:, 1:].copy()
    y[:, :LENGTH] = IGNORE  # the digits are random and the separator fixed: nothing to learn
    return x, y


def reversal_loss(logits, y):
    """Cross-entropy over the reversed half only."""
    return cross_entropy(logits, y, ignore_index=IGNORE)


def accuracy(model, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Per-digit and whole-sequence accuracy of the argmax on the reversed half.

    With the true prefix fed in (teacher forcing), a sequence scores only if every digit is right,
    which is exactly when greedy generation would write the whole reversal correctly.
    """
    model.eval()
    with no_grad():
        predicted = model(Tensor(x)).data.argmax(axis=-1)
    model.train()
    counted = y != IGNORE
    right = (predicted == y) | ~counted
    return float(right[counted].mean()), float(right.all(axis=1).mean())


def run(milestone: Milestone, opts: RunOptions) -> dict:
    """Train on random reversals, then report accuracy on 1,000 unseen ones."""
    opts.refuse(
        "attention",
        {
            "--data": "makes its own sequences of digits",
            "--resume": "keeps no checkpoint",
            "--tokenizer": "reads digits, one token each",
            "--config": "has one model size",
        },
    )
    out, console = opts.out, opts.console
    seed = opts.seed or 0
    opts.console.print(code_line(milestone.requires, opts.completed), highlight=False)
    steps = 500 if opts.steps is None else opts.steps
    prepare_out(out)
    seed_everything(seed)
    # the milestone's preset (tiny), with this task's vocabulary and sequence length
    config = replace(milestone.config, vocab_size=DIGITS + 1, max_seq_len=2 * LENGTH)
    model = GPT.from_config(config)
    optimizer = AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = CosineSchedule(3e-3, min(20, steps // 5), steps, min_lr=3e-4)
    test_x, test_y = sequences(np.random.default_rng([seed, 1]), 1000)
    trainer = Trainer(model, reversal_loss, optimizer, schedule, max_norm=1.0)
    began = time.perf_counter()
    for step in track(range(steps), description="training", console=console):
        x, y = sequences(np.random.default_rng([seed, 0, step]), 64)
        loss = trainer.step(Tensor(x), y)
    seconds = time.perf_counter() - began
    digit_acc, seq_acc = accuracy(model, test_x, test_y)
    model.eval()
    with no_grad():
        model(Tensor(test_x[:1]))
    weights = np.array(model.blocks[-1].attention.last_attention)
    labels = [str(t) if t != SEP else "|" for t in test_x[0]]
    png = plots.reversal_attention(weights, labels, out / "attention.png")
    summary = {
        "milestone": "attention",
        "task": f"reverse {LENGTH} digits",
        "steps": steps,
        "seconds": seconds,
        "final_train_loss": loss,
        "digit_accuracy": digit_acc,
        "sequence_accuracy": seq_acc,
        "chance_digit_accuracy": 1 / DIGITS,
        "test_sequences": len(test_x),
        "files": [png.name, "summary.json"],
    }
    write_json(out / "summary.json", summary)
    table = Table(title=f"reversal of {LENGTH} digits, {len(test_x)} unseen sequences")
    for column in ("digit accuracy", "sequence accuracy", "chance (digit)", "train time"):
        table.add_column(column, justify="right")
    table.add_row(f"{digit_acc:.1%}", f"{seq_acc:.1%}", f"{1 / DIGITS:.0%}", f"{seconds:.1f} s")
    console.print(table)
    return summary
