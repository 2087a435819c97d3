"""Quality run: both implementations train the small config on the same text, batches and init."""

from __future__ import annotations

import sysconfig
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import TinyTrainer, TorchTrainer
from benchmarks.torch_gpt import TorchGPT
from tinytorch.core.autograd import no_grad
from tinytorch.core.losses import cross_entropy
from tinytorch.models.transformer import GPT, PRESETS

VAL_WINDOWS, SEED = 256, 0
CONTEXT, BATCH = 64, 16  # the small training row's shape


def corpus_text() -> tuple[str, str]:
    """The milestone's default corpus, or else the first 400 kB of stdlib sources on disk."""
    try:
        from milestones.corpus import default_corpus
    except ModuleNotFoundError:
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        files = sorted(stdlib.glob("*.py"))
        text = "".join(f.read_text(encoding="utf-8", errors="ignore") for f in files)
        return text[:400_000], "stdlib sources"
    corpus = default_corpus()
    return corpus.text, f"milestones corpus ({corpus.source})"


def _windows(tokens: np.ndarray, starts: np.ndarray, context: int):
    idx = starts[:, None] + np.arange(context + 1)  # (B, T + 1)
    ids = tokens[idx]
    return ids[:, :-1], ids[:, 1:]


def _val_loss(name: str, model, val: np.ndarray, context: int, batch: int) -> float:
    starts = np.linspace(0, len(val) - context - 2, VAL_WINDOWS).astype(np.int64)
    total = 0.0
    for i in range(0, len(starts), batch):
        x, y = _windows(val, starts[i : i + batch], context)
        if name == "tinytorch":
            with no_grad():
                loss = float(cross_entropy(model(x), y).data)
        else:
            with torch.no_grad():
                logits = model(torch.from_numpy(x))
                flat, target = logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1)
                loss = float(torch.nn.functional.cross_entropy(flat, target))
        total += loss * len(x)
    return total / len(starts)


def quality_run(steps: int, eval_every: int = 500, progress=None) -> dict:
    """Train both for `steps` AdamW steps from identical weights on identical batches."""
    text, source = corpus_text()
    chars = sorted(set(text))
    lookup = np.zeros(max(map(ord, chars)) + 1, np.int64)
    lookup[[ord(c) for c in chars]] = np.arange(len(chars))
    tokens = lookup[np.frombuffer(text.encode("utf-32-le"), np.uint32)]
    cut = int(len(tokens) * 0.9)
    train, val = tokens[:cut], tokens[cut:]  # the last 10% of the text is held out
    cfg = replace(PRESETS["small"], vocab_size=len(chars))
    np.random.seed(SEED)
    ours = GPT.from_config(cfg)
    ref = TorchGPT.from_tinytorch(ours)  # identical weights
    trainers = {"tinytorch": TinyTrainer(ours), "torch": TorchTrainer(ref)}
    models = {"tinytorch": ours, "torch": ref}
    seconds = {name: 0.0 for name in trainers}
    curve: list[dict] = []
    for step in range(steps):
        rng = np.random.default_rng([SEED, step])
        x, y = _windows(train, rng.integers(0, len(train) - CONTEXT - 1, BATCH), CONTEXT)
        for name, trainer in trainers.items():
            start = time.perf_counter()
            trainer.step(x, y)
            seconds[name] += time.perf_counter() - start
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            row = {"step": step + 1}
            for name, model in models.items():
                row[name] = _val_loss(name, model, val, CONTEXT, BATCH)
            curve.append(row)
            if progress is not None:
                progress(row, seconds)
    final = curve[-1]
    return {
        "steps": steps,
        "corpus": source,
        "characters": len(text),
        "vocab_size": len(chars),
        "optimizer": "AdamW lr=1e-3 betas=(0.9, 0.999) eps=1e-8 weight_decay=0.01",
        "val_loss": {n: final[n] for n in trainers},
        "wall_s": seconds,
        "val_loss_gap": final["tinytorch"] - final["torch"],
        "curve": curve,
    }


if __name__ == "__main__":  # the quality run alone: python -m benchmarks.quality STEPS OUT.json
    import json
    import sys

    from benchmarks.common import limit_threads

    limit_threads(1)
    result = quality_run(int(sys.argv[1]), progress=lambda row, s: print(row, s, flush=True))
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1) + "\n")
    print(result["val_loss"], result["wall_s"], flush=True)
