"""Shared pieces of the benchmark: what each row measures, both models, threads, statistics.

Model sizes come from the one table, `tinytorch.models.transformer.PRESETS`; a row adds only the
run's shape (batch, sequence length, tokens to generate). The PyTorch side is
`benchmarks/torch_gpt.py`, a nanoGPT-style model.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("tinytorch", "torch")
# The plain lesson code: what a student who completed only modules 01-13 runs (their own layers,
# no module 18 `accelerate`; generation still takes the reference's module 17 cache, as the GPT
# milestone gives it). "tinytorch" is the reference package as a fresh clone runs it: accelerated.
PLAIN = "tinytorch-plain"
WITH_PLAIN = ("tinytorch", PLAIN, "torch")
# The plain lesson code with accelerate's batch split alone (`accelerate(model, parts=())`: no layer
# swapped, the batch over the cores): the own-loop rows measure it beside the plain code
SPLIT = "tinytorch-split"
# Thread settings: "Nt" is N BLAS threads for numpy, N intra-op threads for torch; "Nw" is
# training with the batch split over N threads of one BLAS / intra-op thread each: tinytorch
# through module 18's DataParallel (what `tito milestone run gpt` does on 2 cores), PyTorch through
# the same scheme in TorchTrainer. Each library is reported at its fastest setting.
THREAD_CHOICES = ("1t", "2t")
DATA_PARALLEL = "2w"
# "own": a user's own loop as the README writes it, at the libraries' default threads (no thread
# setting, no DataParallel): `loss = cross_entropy(model(x), y); loss.backward(); opt.step()`;
# tinytorch's accelerated GPT then splits its batch over the cores itself (`accelerate`)
OWN_LOOP = "own"
LR, WEIGHT_DECAY = 1e-3, 0.01
PROMPT_LEN = 16
GEN_CONTEXT = 256  # generation models hold prompt + 200 new tokens: the window never slides


CONV = "conv"  # the preset name of the convolution rows (`--config conv` runs only them)


@dataclass(frozen=True)
class Row:
    """One measurement: `kind` train, generate or gpt2 on the preset `preset`; gemm: the dense
    matrix products of the preset's training step alone (its floor); or conv: one Conv2d
    layer's forward and backward (`preset` CONV, the layer's shape in `conv`)."""

    key: str
    kind: str
    preset: str
    batch: int = 1
    seq_len: int = 0  # training / forward sequence length
    new_tokens: int = 0  # generated tokens (generate, gpt2)
    steps: int = 5  # timed calls per process
    warmup: int = 2
    # conv rows: (in_channels, out_channels, height, width, kernel, stride, padding)
    conv: tuple[int, ...] = ()
    libraries: tuple[str, ...] = LIBRARIES  # who is measured in this row
    cache: bool = True  # generation through module 17's KV cache
    arch: str = "gpt"  # or "llama": module 21's Llama of the preset's sizes, half the kv heads
    settings: tuple[str, ...] = ()  # only these thread settings (default: the plan's)


def config(row: Row):
    """The preset's GPTConfig; generation rows get room for prompt + new tokens; conv rows None."""
    if row.kind == CONV:
        return None
    from tinytorch.models.transformer import PRESETS

    cfg = PRESETS[row.preset]
    if row.kind == "generate":
        cfg = replace(cfg, max_seq_len=GEN_CONTEXT)
    if row.arch == "llama":
        from tinytorch.models.llama import llama_config
        from tinytorch.nn.llama import llama_hidden_dim

        cfg = llama_config(row.preset, max_seq_len=cfg.max_seq_len,
                           num_kv_heads=max(1, cfg.num_heads // 2))  # fmt: skip
        cfg = replace(cfg, hidden_dim=llama_hidden_dim(cfg.embed_dim, cfg.multiple_of))
    return cfg


def parse_setting(setting: str) -> tuple[int, int]:
    """("1t" | "2t" | "2w" | "own") -> (BLAS or torch threads, data-parallel workers); "own" is
    (0, 0): the default threads and the user's own loop."""
    if setting == OWN_LOOP:
        return 0, 0
    count, kind = int(setting[:-1]), setting[-1]
    if kind not in "tw" or count < 1:
        raise ValueError(f"thread setting must look like 1t, 2t or 2w, got {setting!r}")
    return (1, count) if kind == "w" else (count, 1)


def limit_threads(threads: int) -> None:
    """`threads` BLAS threads for numpy (threadpoolctl) and, if imported, torch's intra-op pool."""
    import sys

    import threadpoolctl

    if threads == 0:  # the defaults, untouched
        return
    limit_threads.keep = threadpoolctl.threadpool_limits(threads)  # alive for the process
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def batches(vocab_size: int, batch: int, seq_len: int, count: int, seed: int = 1):
    """`count` random (x, y) token batches (B, T) of int64 ids."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ids = rng.integers(0, vocab_size, size=(batch, seq_len + 1))
        out.append((ids[:, :-1], ids[:, 1:]))
    return out


def tiny_model(cfg, accelerated: bool = True):
    """The tinytorch GPT (or Llama) of a preset, through module 18's `accelerate` unless
    `accelerated=False` (the plain lesson code)."""
    from tinytorch.accel.accelerate import accelerate
    from tinytorch.models.transformer import GPT

    np.random.seed(0)
    if type(cfg).__name__ == "LlamaConfig":  # module 21: accelerate takes tinytorch/accel/llama.py
        from tinytorch.models.llama import Llama

        model = Llama.from_config(cfg)
    else:
        model = GPT.from_config(cfg)
    return accelerate(model) if accelerated else model


class TinyTrainer:
    """Forward, tinytorch's fused cross-entropy, backward and AdamW for a tinytorch GPT, through
    module 18's DataParallel as the GPT milestone trains (its slices on forked workers where the
    system forks, `processes=None`; one worker: the plain step); the optimizer takes module 18's
    fused update when `accelerated` (a fresh clone's milestone)."""

    def __init__(self, model, lr: float = LR, workers: int = 1, accelerated: bool = True):
        from tinytorch.accel.accelerate import accelerate
        from tinytorch.accel.parallel import DataParallel
        from tinytorch.core.losses import cross_entropy
        from tinytorch.core.optimizers import AdamW
        from tinytorch.core.training import Trainer

        opt = AdamW(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY)
        self.model, self.opt = model, accelerate(opt) if accelerated else opt
        self.parallel = DataParallel(model, workers, processes=None) if workers else None
        backward = self.parallel.backward if self.parallel is not None else None
        # module 07's step: the forward and backward split over the workers, or, with no workers,
        # the user's own loop (OWN_LOOP), where `accelerate` splits the batch itself
        self.trainer = Trainer(model, cross_entropy, self.opt, backward=backward)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        from tinytorch.core.tensor import Tensor

        return self.trainer.step(Tensor(x) if self.parallel is None else x, y)


class TorchTrainer:
    """The same step for the PyTorch model (nanoGPT's loop: set_to_none, F.cross_entropy).

    With `workers` > 1 it splits the batch as tinytorch's DataParallel does: each extra thread
    runs its slice through a copy of the model whose parameters share the original's storage,
    and the copies' gradients are added to the original's before the step.
    """

    def __init__(self, model, lr: float = LR, workers: int = 1):
        import copy
        from concurrent.futures import ThreadPoolExecutor

        import torch

        self.torch, self.model = torch, model
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY)
        workers = max(workers, 1)  # OWN_LOOP: the plain loop at torch's default threads
        self.copies = [copy.deepcopy(model) for _ in range(workers - 1)]
        for clone in self.copies:
            for p, q in zip(model.parameters(), clone.parameters()):
                q.data = p.data  # shared storage: AdamW's in-place update reaches every copy
        self.pool = ThreadPoolExecutor(workers - 1) if workers > 1 else None

    def _slice(self, model, x: np.ndarray, y: np.ndarray, weight: float) -> float:
        logits = model(self.torch.from_numpy(x))
        loss = self.torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), self.torch.from_numpy(y).reshape(-1)
        )
        (loss * weight).backward()
        return loss.item() * weight

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        self.opt.zero_grad(set_to_none=True)
        if not self.copies:
            value = self._slice(self.model, x, y, 1.0)
            self.opt.step()
            return value
        n, parts = len(x), len(self.copies) + 1
        bounds = [round(i * n / parts) for i in range(parts + 1)]
        jobs = [(bounds[i], bounds[i + 1]) for i in range(parts)]
        futures = []
        for clone, (a, b) in zip(self.copies, jobs[1:]):
            for q in clone.parameters():
                q.grad = None
            futures.append(self.pool.submit(self._slice, clone, x[a:b], y[a:b], (b - a) / n))
        a, b = jobs[0]
        value = self._slice(self.model, x[a:b], y[a:b], (b - a) / n)
        value += sum(f.result() for f in futures)
        for clone in self.copies:
            for p, q in zip(self.model.parameters(), clone.parameters()):
                p.grad += q.grad
        self.opt.step()
        return value


def summary(values: list[float]) -> dict:
    """Median, quartiles, the bootstrap interval of the median (module 19's `summarize`), min,
    max and n of a list of per-process results."""
    from tinytorch.bench.harness import summarize

    a = np.asarray(values, dtype=float)
    return {
        **summarize(a).as_record(),
        "min": float(a.min()),
        "max": float(a.max()),
        "values": [float(v) for v in a],
    }


def peak_rss_kib() -> int:
    """This process's peak resident memory: VmHWM on Linux (ru_maxrss survives execve there)."""
    status = Path("/proc/self/status")
    if status.is_file():
        found = re.search(r"VmHWM:\s*(\d+) kB", status.read_text())
        if found:
            return int(found.group(1))
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def blas_info() -> dict:
    """numpy's BLAS as threadpoolctl sees it, and whether OPENBLAS_CORETYPE is set."""
    import threadpoolctl

    libs = [lib for lib in threadpoolctl.threadpool_info() if lib.get("user_api") == "blas"]
    lib = libs[0] if libs else {}
    return {
        "internal_api": lib.get("internal_api", "unknown"),
        "version": lib.get("version", "unknown"),
        "kernel": lib.get("architecture") or lib.get("corename") or "unknown",
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
    }


def torch_info() -> dict:
    """torch's version, BLAS, and its CPU kernel level (the ATen dispatch ISA)."""
    import torch

    shown = torch.__config__.show()
    blas = re.findall(r"BLAS_INFO=([^,\s]+)", shown)
    isa = re.findall(r"CPU capability usage: (\S+)", shown)
    return {
        "version": torch.__version__,
        "blas": blas[0] if blas else "unknown",
        "cpu_capability": isa[0] if isa else "unknown",
    }
