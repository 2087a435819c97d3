"""A user's own training loop, timed end to end: nanoGPT's CPU run of its character model.

nanoGPT's README trains its Shakespeare character model on a CPU with block 64, batch 12, 4 layers,
4 heads, width 128, no dropout, 2,000 iterations (AdamW at 1e-3 with betas (0.9, 0.99), weight
decay 0.1, 100 warm-up steps, a cosine decay to 1e-4, gradients clipped at 1.0). This runs that
loop three ways, each in a process of its own that imports one library, at the libraries' default
threads (no DataParallel, nothing a user would not write):

- `torch`: benchmarks/torch_gpt.py's nanoGPT-style model, `torch.optim.AdamW`;
- `tinytorch-plain`: the lesson code of modules 01-13 as they are, in the same loop;
- `tinytorch-split`: the same lesson code after `accelerate(model, parts=())`, which swaps no
  layer and only splits each batch over the cores (the optimizer stays the lesson's AdamW);
- `tinytorch`: the same loop after the one call the README shows, `accelerate(model)` and
  `accelerate(optimizer)` (module 18).

Same text (the GPT milestone's corpus, as characters), same batches, same schedule. Each child
reports its training wall time (the 2,000 steps, no evaluation inside), its CPU time and peak
memory (VmHWM after the imports, as the main benchmark; with `accelerate`'s split over processes,
its worker's CPU time and private memory are added in) and its validation loss at the end on
fixed windows.

    python -m benchmarks.user_loop [--iters 2000] [--out benchmarks/user_loop.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WHO = ("torch", "tinytorch-plain", "tinytorch-split", "tinytorch")
SHAPE = {"block": 64, "batch": 12, "layers": 4, "heads": 4, "width": 128}
LR, MIN_LR, WARMUP, BETAS, DECAY, CLIP = 1e-3, 1e-4, 100, (0.9, 0.99), 0.1, 1.0
VAL_WINDOWS = 240  # fixed windows of the held-out tenth, 20 batches of 12


def lr_at(step: int, iters: int) -> float:
    """nanoGPT's schedule: linear warm-up, then a cosine from LR down to MIN_LR at `iters`."""
    if step < WARMUP:
        return LR * (step + 1) / (WARMUP + 1)
    progress = min((step - WARMUP) / max(iters - WARMUP, 1), 1.0)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * progress)) * (LR - MIN_LR)


def make_data(folder: Path) -> dict:
    """The corpus as character ids, split 90/10, written as .npy files for the children."""
    from milestones.corpus import default_corpus

    text = default_corpus().text
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    cut = int(0.9 * len(ids))
    np.save(folder / "train.npy", ids[:cut])
    np.save(folder / "val.npy", ids[cut:])
    return {"vocab_size": len(chars), "characters": len(ids)}


def schedule(train: np.ndarray, iters: int, seed: int = 1337) -> np.ndarray:
    """Every step's window starts (iters, batch), drawn once so both libraries see the same."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, len(train) - SHAPE["block"] - 1, size=(iters, SHAPE["batch"]))


def windows(ids: np.ndarray, starts: np.ndarray):
    at = starts[:, None] + np.arange(SHAPE["block"] + 1)
    return ids[at[:, :-1]], ids[at[:, 1:]]


def child(who: str, folder: Path, vocab_size: int, iters: int) -> dict:
    """Train in this process with one library; return time, memory and validation loss."""
    from benchmarks.common import peak_rss_kib

    train, val = np.load(folder / "train.npy"), np.load(folder / "val.npy")
    starts = schedule(train, iters)
    val_starts = np.linspace(0, len(val) - SHAPE["block"] - 2, VAL_WINDOWS).astype(np.int64)
    shape = {
        "vocab_size": vocab_size, "embed_dim": SHAPE["width"], "num_layers": SHAPE["layers"],
        "num_heads": SHAPE["heads"], "max_seq_len": SHAPE["block"], "mlp_ratio": 4,
        "tie_weights": True,
    }  # fmt: skip
    if who == "torch":
        import torch

        from benchmarks.torch_gpt import TorchGPT

        torch.manual_seed(0)
        base = peak_rss_kib()
        model = TorchGPT(SimpleNamespace(**shape))
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, weight_decay=DECAY)

        def step(x, y, lr):
            for group in opt.param_groups:
                group["lr"] = lr
            logits = model(torch.from_numpy(x))
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab_size), torch.from_numpy(y).reshape(-1)
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()

        def val_loss(x, y):
            with torch.no_grad():
                logits = model(torch.from_numpy(x))
                return float(
                    torch.nn.functional.cross_entropy(
                        logits.reshape(-1, vocab_size), torch.from_numpy(y).reshape(-1)
                    )
                )

        threads = f"torch {torch.get_num_threads()} intra-op threads"
    else:
        import threadpoolctl

        from tinytorch.accel.accelerate import accelerate
        from tinytorch.accel.processes import split_of
        from tinytorch.core.autograd import no_grad
        from tinytorch.core.losses import cross_entropy
        from tinytorch.core.optimizers import AdamW
        from tinytorch.core.training import train_step
        from tinytorch.models.transformer import GPT, GPTConfig

        np.random.seed(0)
        base = peak_rss_kib()
        model = GPT.from_config(GPTConfig(**shape))
        opt = AdamW(model.parameters(), lr=LR, betas=BETAS, weight_decay=DECAY)
        if who == "tinytorch":
            model, opt = accelerate(model), accelerate(opt)
        elif who == "tinytorch-split":
            model = accelerate(model, parts=())

        def step(x, y, lr):  # module 07's step: zero_grad, forward, backward, clip, step
            opt.lr = lr
            train_step(model, cross_entropy, opt, x, y, max_norm=CLIP)

        def val_loss(x, y):
            with no_grad():
                return float(cross_entropy(model(x), y).data)

        threads = None  # read after the loop: an accelerated GPT holds BLAS at one thread
    begin = time.perf_counter()
    cpu = time.process_time()
    for i in range(iters):
        step(*windows(train, starts[i]), lr_at(i, iters))
    seconds, cpu_seconds = time.perf_counter() - begin, time.process_time() - cpu
    worker_mib = 0.0
    if threads is None:
        found = threadpoolctl.threadpool_info()
        threads = ", ".join(f"{i['internal_api']} {i['num_threads']} threads" for i in found)
        split = split_of(model)
        if split is not None:  # accelerate's forked worker: its CPU time and memory count too
            cpu_seconds += split.cpu_seconds()
            worker_mib = split.memory_kib() / 1024
            threads += f"; batch split over {len(split.workers) + 1} processes"
        elif who != "tinytorch-plain":
            threads += f"; batch split over {getattr(model, 'split_workers', 1)} threads"
    total = 0.0
    for i in range(0, VAL_WINDOWS, SHAPE["batch"]):
        total += val_loss(*windows(val, val_starts[i : i + SHAPE["batch"]]))
    batches = VAL_WINDOWS // SHAPE["batch"]
    return {
        "who": who, "seconds": seconds, "cpu_seconds": cpu_seconds,
        "peak_mib": (peak_rss_kib() - base) / 1024 + worker_mib, "val_loss": total / batches,
        "threads": threads,
    }  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", choices=WHO, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--vocab", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.iters <= WARMUP:
        parser.error(f"--iters must be more than the {WARMUP} warm-up steps")
    if args.child:
        print(json.dumps(child(args.child, args.data, args.vocab, args.iters)))
        return 0
    from benchmarks.common import blas_info

    results = {"shape": SHAPE, "iters": args.iters, "blas": blas_info(), "runs": []}
    blas = results["blas"]
    print(
        f"numpy BLAS: {blas.get('internal_api')} {blas.get('version')}, kernel "
        f"{blas.get('kernel')}, OPENBLAS_CORETYPE {blas.get('OPENBLAS_CORETYPE')}; "
        f"{args.iters} iterations each, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    results["load_before"] = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="user-loop-") as folder:
        data = make_data(Path(folder))
        results["data"] = data
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for who in WHO:
            command = [sys.executable, "-m", "benchmarks.user_loop", "--child", who,
                       "--data", folder, "--vocab", str(data["vocab_size"]),
                       "--iters", str(args.iters)]  # fmt: skip
            run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            if run.returncode:
                print(run.stderr[-3000:], file=sys.stderr)
                return 1
            record = json.loads(run.stdout.strip().splitlines()[-1])
            results["runs"].append(record)
            print(
                f"{who:16} {record['seconds']:7.1f} s  (CPU {record['cpu_seconds']:.1f} s)  "
                f"peak {record['peak_mib']:6.1f} MiB  val loss {record['val_loss']:.3f}  "
                f"[{record['threads']}]",
                flush=True,
            )
    torch_s = results["runs"][0]["seconds"]
    for record in results["runs"][1:]:
        print(f"{record['who']} / torch: {record['seconds'] / torch_s:.2f}x the time")
    results["load_after"] = os.getloadavg()[0]
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
