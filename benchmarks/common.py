"""Shared pieces of the benchmark: configs, the two models, one training step each, timing stats.

The PyTorch baseline is `tests/torch_reference.py` (imported by path: tests/ is not a package).
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
THREADS = 2


@dataclass(frozen=True)
class BenchConfig:
    name: str
    vocab_size: int
    embed_dim: int
    num_layers: int
    num_heads: int
    context: int
    batch: int

    def gpt_kwargs(self, max_seq_len: int | None = None) -> dict:
        return dict(vocab_size=self.vocab_size, embed_dim=self.embed_dim,
                    num_layers=self.num_layers, num_heads=self.num_heads,
                    max_seq_len=max_seq_len or self.context)  # fmt: skip


CONFIGS = {
    "small": BenchConfig("small", 65, 128, 4, 4, context=64, batch=16),
    "medium": BenchConfig("medium", 65, 256, 6, 8, context=128, batch=16),
}
PROMPT_LEN, NEW_TOKENS = 16, 200
# Generation models hold prompt + new tokens in their context (the rest of the config unchanged):
# at context 64 or 128 the window would slide and both caches would refill on every token.
GEN_CONTEXT = 256
LR, WEIGHT_DECAY = 1e-3, 0.01


def limit_threads(with_torch: bool = True) -> None:
    """Two threads for numpy's BLAS and torch (OPENBLAS_CORETYPE is left as it is)."""
    import threadpoolctl

    limit_threads.keep = threadpoolctl.threadpool_limits(THREADS)  # alive for the process
    if with_torch:
        import torch

        torch.set_num_threads(THREADS)


def torch_reference():
    """The module tests/torch_reference.py (TorchGPT), imported from its path."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import torch_reference

    return torch_reference


def cross_entropy(logits, targets):
    """tinytorch's fused cross-entropy, or the adapter below until module 04 is exported."""
    try:
        from tinytorch.core.losses import cross_entropy as ce
    except ModuleNotFoundError:
        return _cross_entropy_function().apply(logits, targets=np.asarray(targets))
    return ce(logits, targets)


@functools.cache
def _cross_entropy_function():
    from tinytorch.core.tensor import Function

    class CrossEntropy(Function):
        """Mean next-token loss, log-softmax fused with its backward (softmax - one_hot) / n."""

        def forward(self, logits, targets):
            flat = logits.reshape(-1, logits.shape[-1])  # (N, V)
            rows, t = np.arange(len(flat)), targets.reshape(-1)
            shifted = flat - flat.max(axis=1, keepdims=True)
            exp = np.exp(shifted)
            total = exp.sum(axis=1, keepdims=True)
            loss = np.log(total[:, 0]).mean() - shifted[rows, t].mean()
            if self.needs_grad[0]:
                exp /= total
                self.saved = exp, rows, t, logits.shape
            return np.asarray(loss, dtype=logits.dtype)

        def backward(self, grad):
            probs, rows, t, shape = self.saved
            probs[rows, t] -= 1
            probs *= grad / len(rows)
            return (probs.reshape(shape),)

    return CrossEntropy


def batches(cfg: BenchConfig, count: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` random (x, y) token batches (B, T) of int64 ids."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ids = rng.integers(0, cfg.vocab_size, size=(cfg.batch, cfg.context + 1))
        out.append((ids[:, :-1], ids[:, 1:]))
    return out


def build_pair(cfg: BenchConfig, max_seq_len: int | None = None, seed: int = 0):
    """A tinytorch GPT and a TorchGPT with the same weights (float32)."""
    from tinytorch.models.transformer import GPT

    np.random.seed(seed)
    ours = GPT(**cfg.gpt_kwargs(max_seq_len))
    ref = torch_reference().TorchGPT.from_tinytorch(ours)
    return ours, ref


class TinyTrainer:
    """Forward, cross-entropy, backward and AdamW for the tinytorch GPT."""

    def __init__(self, model, lr: float = LR):
        from tinytorch.core.optimizers import AdamW

        self.model, self.opt = model, AdamW(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        loss = cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.data)


class TorchTrainer:
    """The same step for the TorchGPT."""

    def __init__(self, model, lr: float = LR):
        import torch

        self.torch = torch
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=WEIGHT_DECAY)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        torch = self.torch
        logits = self.model(torch.from_numpy(x))
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1)
        )
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.item()


def stats(seconds: list[float]) -> dict:
    """Median, p10, p90 (ms) and the relative spread (p90 - p10) / median."""
    ms = np.asarray(seconds) * 1e3
    med, p10, p90 = (float(np.percentile(ms, q)) for q in (50, 10, 90))
    return {"median_ms": med, "p10_ms": p10, "p90_ms": p90, "spread": (p90 - p10) / med,
            "n": len(ms)}  # fmt: skip


def interleaved(fns: dict, warmup: int, reps: int) -> dict[str, dict]:
    """Time each callable `reps` times, alternating between them, after `warmup` calls each."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: stats(t) for name, t in times.items()}


def train_flops(cfg: BenchConfig) -> dict:
    """Matmul FLOPs of one training step (forward + backward), as a formula and its terms.

    P = matmul weights per token = L * 12 C^2 (q, k, v, out: 4 C^2; MLP: 8 C^2) + C V (lm_head);
    N = B T tokens. Linear layers: 2 P N forward, 4 P N backward. Attention scores and
    weights @ values over the full T x T square (the causal half is not skipped by either side):
    2 * 2 B T^2 C per layer forward, twice that backward. Total = 6 P N + 12 L B T^2 C.
    """
    b, t, c, n_l, v = cfg.batch, cfg.context, cfg.embed_dim, cfg.num_layers, cfg.vocab_size
    params = n_l * 12 * c * c + c * v
    linear, attention = 6 * params * b * t, 12 * n_l * b * t * t * c
    return {"formula": "6*P*B*T + 12*L*B*T^2*C, P = 12*L*C^2 + C*V", "matmul_params": params,
            "linear": linear, "attention": attention, "total": linear + attention}  # fmt: skip


def matmul_shapes(cfg: BenchConfig) -> list[tuple[int, int, int, int, int]]:
    """(count, batch, m, k, n) of every matmul in one training step, forward and backward."""
    b, t, c, v = cfg.batch, cfg.context, cfg.embed_dim, cfg.vocab_size
    n, h, d, layers = b * t, cfg.num_heads, cfg.embed_dim // cfg.num_heads, cfg.num_layers
    shapes = []
    for k, m, count in ((c, c, 4 * layers), (c, 4 * c, layers), (4 * c, c, layers), (c, v, 1)):
        shapes += [(count, 1, n, k, m), (count, 1, n, m, k), (count, 1, k, n, m)]  # y, dx, dW
    # attention per layer: q k^T and w v forward; four products backward
    shapes += [(3 * layers, b * h, t, d, t), (3 * layers, b * h, t, t, d)]
    return shapes


def numpy_matmul_seconds(cfg: BenchConfig, reps: int = 5) -> float:
    """Time numpy alone needs for the step's matmuls (sum of per-shape medians)."""
    rng = np.random.default_rng(0)
    total = 0.0
    for count, batch, m, k, n in matmul_shapes(cfg):
        a = rng.standard_normal((batch, m, k), dtype=np.float32)
        w = rng.standard_normal((batch, k, n), dtype=np.float32)
        out = np.empty((batch, m, n), np.float32)
        np.matmul(a, w, out=out)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            np.matmul(a, w, out=out)
            times.append(time.perf_counter() - start)
        total += count * float(np.median(times))
    return total


def blas_info() -> dict:
    """numpy's BLAS as threadpoolctl sees it, and whether OPENBLAS_CORETYPE is set."""
    import os

    import threadpoolctl

    libs = [lib for lib in threadpoolctl.threadpool_info() if lib.get("user_api") == "blas"]
    lib = libs[0] if libs else {}
    return {
        "internal_api": lib.get("internal_api", "unknown"),
        "version": lib.get("version", "unknown"),
        "kernel": lib.get("architecture") or lib.get("corename") or "unknown",
        "num_threads": lib.get("num_threads"),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
    }
