"""The training loop of the GPT milestone: batches, evaluation, checkpoints and exact resume.

A batch is a function of (seed, step) only, the learning rate a function of the step, and the
checkpoint holds the weights, the AdamW state, numpy's global RNG state and the loss history, so
a run resumed from step k ends with the same weights as one that was never interrupted.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from milestones.errors import MilestoneError
from milestones.runs import CHECKPOINT, META_KEY, meta_array, read_meta  # noqa: F401 - the format
from tinytorch.accel.accelerate import accelerate
from tinytorch.accel.parallel import DataParallel
from tinytorch.core.autograd import no_grad
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import CosineSchedule, Trainer, load_checkpoint, save_checkpoint
from tinytorch.data.loader import LanguageModelDataset

# Called with the number of finished steps after each step; tests use it to press Ctrl-C.
after_step: Callable[[int], None] | None = None


@dataclass
class History:
    train: list[float] = field(default_factory=list)  # one loss per step
    val: list[tuple[int, float]] = field(default_factory=list)  # (step, loss)
    resumed_at: int = 0  # the step this session started from


@dataclass
class Settings:
    steps: int
    batch_size: int
    max_seq_len: int
    lr: float
    warmup: int
    min_lr: float
    weight_decay: float
    clip: float
    eval_every: int
    eval_windows: int
    checkpoint_every: int
    seed: int
    to_bits_per_char: float = 1 / math.log(2)  # times a loss in nats per token: bits per character
    workers: int = 1  # data-parallel workers per step (module 18's DataParallel)
    accelerate: tuple[str, ...] = ()  # module 18's parts for the optimizer ("adamw")


def default_workers() -> int:
    """Two data-parallel workers where two cores exist to run them, else one.

    Measured on a 2-core machine (small preset, batch 16): 85 ms a step with one thread and one
    BLAS thread, 60 ms with two BLAS threads, 51 ms with two workers of one BLAS thread each.
    With module 18's kernels (2026-12-05): 46-48 ms with two threads, 38.5 ms with a forked
    worker process (`DataParallel(processes=None)`, what the milestone uses on Linux).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


def batch_at(data: LanguageModelDataset, seed: int, step: int, batch_size: int):
    """The (x, y) batch of a step: random windows drawn from a generator seeded by (seed, step)."""
    rng = np.random.default_rng([seed, step])
    return data.gather(rng.integers(0, len(data), size=batch_size))


def evaluate(model, data: LanguageModelDataset, windows: int, batch_size: int) -> float:
    """Mean next-token loss over `windows` evenly spaced validation windows (fixed each call)."""
    starts = np.linspace(0, len(data) - 1, num=min(windows, len(data))).astype(np.int64)
    total = 0.0
    model.eval()
    with no_grad():
        for i in range(0, len(starts), batch_size):
            x, y = data.gather(starts[i : i + batch_size])
            total += float(cross_entropy(model(Tensor(x)), y).data) * len(x)
    model.train()
    return total / len(starts)


def _rng_arrays() -> dict[str, np.ndarray]:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "rng_keys": np.asarray(keys),
        "rng_ints": np.array([pos, has_gauss], dtype=np.int64),
        "rng_gauss": np.array([gauss], dtype=np.float64),
    }


def _set_rng(extra: dict) -> None:
    pos, has_gauss = (int(v) for v in extra["rng_ints"])
    gauss = float(extra["rng_gauss"][0])
    np.random.set_state(("MT19937", np.asarray(extra["rng_keys"]), pos, has_gauss, gauss))


def save(path: Path, model, optimizer, step: int, meta: dict, history: History) -> None:
    """Write the checkpoint (save_checkpoint writes a temporary file, then renames it)."""
    extra = {
        META_KEY: meta_array(meta),
        "history_train": np.asarray(history.train, dtype=np.float64),
        "history_val": np.asarray(history.val, dtype=np.float64).reshape(-1, 2),
        **_rng_arrays(),
    }
    save_checkpoint(path, model, optimizer, step=step, extra=extra)


def restore(path: Path, model, optimizer) -> tuple[int, History]:
    """Load weights, optimizer and RNG state; return the finished step count and history."""
    try:
        info = load_checkpoint(path, model, optimizer)
    except Exception as err:  # noqa: BLE001 - a checkpoint that does not fit this model
        raise MilestoneError(
            f"checkpoint {path} does not fit this model: {err}",
            hint="resume with the same --config and --data, or start afresh without --resume",
        ) from None
    extra = info.get("extra", info)
    _set_rng(extra)
    history = History(
        train=[float(v) for v in extra["history_train"]],
        val=[(int(s), float(v)) for s, v in np.asarray(extra["history_val"]).reshape(-1, 2)],
    )
    return int(info["step"]), history


class _StopFlag:
    """Turns the first Ctrl-C into a request to stop after the current step."""

    def __init__(self):
        self.requested = False
        self.previous = None

    def _handle(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, self.previous)  # a second Ctrl-C stops at once

    def __enter__(self):
        self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}  lr {task.fields[lr]:.2e}"),
        TextColumn("{task.fields[tps]:,.0f} tok/s"),
        TimeRemainingColumn(),
        TextColumn("left"),
        console=console,
        transient=False,
    )


WARN_AFTER_STEPS = 3  # steps timed before the length of the whole run is estimated
LONG_RUN_SECONDS = 3600  # a run estimated to last longer than this is announced


def duration(seconds: float) -> str:
    """A length of time in the unit a person would say it in."""
    for unit, size, limit in (("s", 1, 120), ("minutes", 60, 7200), ("hours", 3600, 172800)):
        if seconds < limit:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds / 86400:,.0f} days"


def long_run_warning(steps_left: int, seconds_per_step: float) -> str | None:
    """The warning for a run that would last over LONG_RUN_SECONDS at this pace, else None."""
    if steps_left * seconds_per_step <= LONG_RUN_SECONDS:
        return None
    return (
        f"warning: {steps_left:,} more steps at {1000 * seconds_per_step:,.0f} ms a step take "
        f"about {duration(steps_left * seconds_per_step)}; Ctrl-C stops after the current step and "
        "keeps a checkpoint (--resume continues), or choose fewer --steps"
    )


def train(model, train_data, val_data, cfg: Settings, out: Path, meta: dict, resume: bool,
          console: Console):  # fmt: skip
    """Train to cfg.steps (from the checkpoint on resume); return history, seconds, optimizer.

    `seconds` counts the training steps only (forward, backward, update), not the evaluations
    and checkpoints between them; the progress bar's tok/s is the same training throughput.
    """
    optimizer = accelerate(
        AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay), cfg.accelerate
    )
    schedule = CosineSchedule(cfg.lr, cfg.warmup, cfg.steps, min_lr=cfg.min_lr)
    path = out / CHECKPOINT
    start, history = 0, History()
    if resume:
        start, history = restore(path, model, optimizer)
        history.resumed_at = start
        console.print(f"resumed from {path} at step {start} of {cfg.steps}")
        if start >= cfg.steps:
            console.print("the run had finished its training: sampling and reporting again")
            return history, 0.0, optimizer
    if not history.val:
        history.val.append((0, evaluate(model, val_data, cfg.eval_windows, cfg.batch_size)))
    tokens_per_step = cfg.batch_size * cfg.max_seq_len
    # the batch's forward and backward over forked workers that share the weights where the
    # system forks (Linux), else over threads
    parallel = DataParallel(model, cfg.workers, processes=None)
    trainer = Trainer(model, cross_entropy, optimizer, schedule, cfg.clip, parallel.backward)
    trainer.step_count = start
    seconds = 0.0  # in training steps only
    with _StopFlag() as stop, _progress(console) as bar:
        loss = history.train[-1] if history.train else history.val[-1][1]
        task = bar.add_task("train", total=cfg.steps, completed=start, loss=loss, lr=0.0, tps=0.0)
        for step in range(start, cfg.steps):
            tick = time.perf_counter()
            x, y = batch_at(train_data, cfg.seed, step, cfg.batch_size)
            loss = trainer.step(x, y)
            seconds += time.perf_counter() - tick
            done = step + 1
            history.train.append(loss)
            if done % cfg.eval_every == 0 or done == cfg.steps:
                val = evaluate(model, val_data, cfg.eval_windows, cfg.batch_size)
                history.val.append((done, val))
                bar.console.print(
                    f"step {done:>5}  train {history.train[-1]:.3f}  val {val:.3f} "
                    f"({val * cfg.to_bits_per_char:.3f} bits/char)"
                )
            if done % cfg.checkpoint_every == 0 or done == cfg.steps:
                save(path, model, optimizer, done, meta, history)
            if done - start == WARN_AFTER_STEPS:
                warning = long_run_warning(cfg.steps - done, seconds / WARN_AFTER_STEPS)
                if warning:
                    bar.console.print(f"[yellow]{warning}[/yellow]", highlight=False)
            tps = tokens_per_step * (done - start) / max(seconds, 1e-9)
            bar.update(task, completed=done, loss=history.train[-1], lr=optimizer.lr, tps=tps)
            if after_step is not None:
                after_step(done)
            if stop.requested and done < cfg.steps:
                save(path, model, optimizer, done, meta, history)
                raise MilestoneError(
                    f"interrupted at step {done} of {cfg.steps}; checkpoint saved to {path}",
                    hint="continue with the same command plus --resume",
                    exit_code=130,
                )
    return history, seconds, optimizer
