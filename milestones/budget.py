"""The quality event's training: a GPT trained under the tool's clock, a CPU-second budget.

The entrant chooses the model size, learning rate, batch size and transformations (in the
manifest's "train" entry); the tool writes the training loop. Training runs in a process of its
own, which saves a checkpoint every few steps and says so on stdout; the tool reads that
process's CPU time from the kernel (/proc), not from the process, and stops it once the budget is
spent. Every model reads characters (module 10's CharTokenizer), whatever its preset's default,
so no budget goes to learning BPE merges. The budget counts the process from its start (imports,
corpus, building the model), so work done while the model is built counts too. The last
checkpoint saved within it is the entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from milestones.errors import MilestoneError

SAVE_EVERY = 5  # steps between checkpoints
DEFAULTS = {"config": "tiny", "lr": 3e-3, "batch_size": 16, "seed": 0}
LIMITS = {"lr": (1e-5, 1.0), "batch_size": (1, 256), "seed": (0, 2**31 - 1)}


def settings(manifest: dict) -> dict:
    """The manifest's training choices, checked, with the defaults for what it leaves out."""
    from milestones.gpt import TRAINING

    chosen = manifest.get("train", {})
    if not isinstance(chosen, dict) or set(chosen) - set(DEFAULTS):
        raise MilestoneError(
            "the manifest's 'train' entry must be an object with some of: " + ", ".join(DEFAULTS),
            hint='e.g. "train": {"config": "tiny", "lr": 0.003, "batch_size": 16}',
        )
    job = {**DEFAULTS, **chosen}
    if job["config"] not in TRAINING:
        raise MilestoneError(
            f"unknown config '{job['config']}'", hint=f"choose one of: {', '.join(TRAINING)}"
        )
    for key, (low, high) in LIMITS.items():
        value = job[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not low <= value <= high
        ):
            raise MilestoneError(
                f"'train.{key}' must be a number from {low} to {high}, got {value!r}"
            )
    job["batch_size"], job["seed"] = int(job["batch_size"]), int(job["seed"])
    return job


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` and its reaped children, read from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def train(
    job: dict, transforms: list[str], out: Path, budget: float, data_dir: Path | None
) -> float:
    """Train in a process of its own until `budget` CPU-seconds; returns the CPU-seconds at the
    last checkpoint saved (which `out` then holds)."""
    out.mkdir(parents=True, exist_ok=True)
    request = {**job, "transforms": transforms, "out": str(out),
               "data_dir": str(data_dir) if data_dir else None}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", "from milestones.budget import child; child()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    proc.stdin.write(json.dumps(request))
    proc.stdin.close()
    saved = []  # (CPU-seconds when the save was reported, its file), within the budget

    def read():
        for line in proc.stdout:
            if not line.startswith("saved "):
                continue
            used = cpu_seconds_or_none(proc.pid)  # read after the save: never less than its own
            path = out / f"step-{int(line.split()[1])}.npz"
            if used is None or used > budget:
                break
            if saved:
                saved[-1][1].unlink(missing_ok=True)
            saved.append((used, path))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while proc.poll() is None:
            used = cpu_seconds_or_none(proc.pid)
            if used is not None and used >= budget:
                break
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
        reader.join(timeout=5)
    from milestones.training import CHECKPOINT

    for late in out.glob("step-*.npz"):
        if not saved or late != saved[-1][1]:
            late.unlink()  # saved after the budget was spent
    for partial in out.glob(".step-*.npz.*.tmp"):
        partial.unlink()  # a save the kill cut short (write_atomic's temporary twin)
    if not saved:
        error = (proc.stderr.read().strip().splitlines() or ["no checkpoint in time"])[-1]
        raise MilestoneError(
            f"training saved no checkpoint within {budget:g} CPU-seconds ({error})",
            hint="give a larger budget or a smaller config or batch",
        )
    used, path = saved[-1]
    path.replace(out / CHECKPOINT)
    return used


def cpu_seconds_or_none(pid: int) -> float | None:
    try:
        return cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return None  # the process is gone


def child() -> None:
    """The training process: the tool's loop over the entrant's choices, a checkpoint every
    SAVE_EVERY steps, until it is stopped."""
    job = json.loads(sys.stdin.read())
    from milestones import tokens, training
    from milestones.corpus import DEFAULT_SOURCE, default_corpus
    from milestones.gpt import TRAINING, config_summary
    from milestones.olympics import apply
    from tinytorch.core.losses import cross_entropy
    from tinytorch.core.optimizers import AdamW
    from tinytorch.core.tensor import Tensor
    from tinytorch.core.training import Trainer, seed_everything
    from tinytorch.data.loader import LanguageModelDataset
    from tinytorch.models.transformer import GPT, PRESETS

    data_dir = Path(job["data_dir"]) if job["data_dir"] else None
    # characters for every entry: learning BPE merges would spend the budget before training
    setup = replace(TRAINING[job["config"]], lr=job["lr"], batch_size=job["batch_size"],
                    tokenizer="char")  # fmt: skip
    corpus = default_corpus(data_dir)
    vocab = tokens.build(setup.tokenizer, corpus, setup.bpe_vocab, data_dir)
    config = replace(PRESETS[job["config"]], vocab_size=vocab.vocab_size)
    data = LanguageModelDataset(vocab.encode(corpus.text), config.max_seq_len)
    seed_everything(job["seed"])
    model = apply(GPT.from_config(config), job["transforms"])
    optimizer = AdamW(model.parameters(), lr=setup.lr, weight_decay=0.01)
    if "accelerate" in job["transforms"]:
        from tinytorch.accel.accelerate import accelerate

        optimizer = accelerate(optimizer)
    meta = {"config": config_summary(job["config"], config, setup), "seed": job["seed"],
            "steps": 0, "corpus_source": DEFAULT_SOURCE, "corpus_sha256": corpus.sha256,
            "vocab": vocab.fingerprint}  # fmt: skip
    history = training.History()
    trainer = Trainer(model, cross_entropy, optimizer)
    step = 0
    while True:
        x, y = training.batch_at(data, job["seed"], step, setup.batch_size)
        history.train.append(trainer.step(Tensor(x), y))
        step += 1
        if step % SAVE_EVERY == 0:
            training.save(Path(job["out"]) / f"step-{step}.npz", model, optimizer, step,
                          {**meta, "steps": step}, history)  # fmt: skip
            print("saved", step, flush=True)
