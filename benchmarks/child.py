"""One measurement in a process of its own: `python -m benchmarks.child LIBRARY SETTING ROW_JSON`.

LIBRARY is tinytorch (the reference package as a fresh clone runs it: module 18's `accelerate` on
the model and the optimizer), tinytorch-plain (the plain lesson code of modules 01-13, what a
student who completed only those runs), tinytorch-split (that plain code with only accelerate's
split of the batch over the cores, `accelerate(model, parts=())`; own-loop rows) or torch.

SETTING is 1t or 2t (BLAS / torch threads) or, for training, 2w (the batch split in two halves of
one BLAS / torch thread each: tinytorch's DataParallel as the GPT milestone runs it, the second
half on a forked worker on Linux, and the same split on two threads for PyTorch).
Imports one library only (tinytorch, or torch plus tinytorch's preset table), sets its threads,
records the peak RSS after the imports as the baseline, builds the model, runs the row's warm-up
and timed calls, and prints one JSON line: the timings and the peak RSS above the baseline (with
`accelerate`'s split over processes, its worker's CPU time and private memory are added in).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from benchmarks.common import (
    PLAIN,
    PROMPT_LEN,
    SPLIT,
    Row,
    batches,
    config,
    limit_threads,
    parse_setting,
    peak_rss_kib,
    tiny_model,
)


def _timed(fn, warmup: int, reps: int, clock=time.process_time) -> tuple[list, list]:
    """Wall-clock and CPU seconds (this process, all its threads, and what `clock` adds: a
    process split's workers) of each timed call."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(reps):
        start, start_cpu = time.perf_counter(), clock()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(clock() - start_cpu)
    return wall, cpu


def _build(library: str, cfg):
    if library == SPLIT:  # the plain lessons, with only accelerate's split of the batch
        from tinytorch.accel.accelerate import accelerate

        return accelerate(tiny_model(cfg, accelerated=False), parts=())
    if library in ("tinytorch", PLAIN):
        return tiny_model(cfg, accelerated=library == "tinytorch")
    import torch

    from benchmarks.torch_gpt import TorchGPT
    from benchmarks.torch_llama import TorchLlama

    torch.manual_seed(0)
    if type(cfg).__name__ == "LlamaConfig":
        return TorchLlama(cfg, cfg.hidden_dim)
    return TorchGPT(cfg)


def _train(library: str, row: Row, cfg, workers: int = 1) -> dict:
    from benchmarks.common import TinyTrainer, TorchTrainer

    model = _build(library, cfg)
    if library == "torch":
        trainer = TorchTrainer(model, workers=workers)
    else:
        trainer = TinyTrainer(model, workers=workers, accelerated=library == "tinytorch")
    data = batches(cfg.vocab_size, row.batch, row.seq_len, row.warmup + row.steps)
    cursor = iter(data)
    split_of = _no_split if library == "torch" else _split_of

    def clock():  # accelerate's forked worker, once the first split made it, counts too
        split = split_of(model)
        return time.process_time() + (split.cpu_seconds() if split is not None else 0.0)

    wall, cpu = _timed(lambda: trainer.step(*next(cursor)), row.warmup, row.steps, clock)
    out = {"step_ms": float(np.median(wall)) * 1e3, "step_cpu_ms": float(np.median(cpu)) * 1e3}
    split = split_of(model)
    if split is not None:  # the worker's own memory counts too
        out["worker_mib"] = split.memory_kib() / 1024
    return out


def _no_split(model) -> None:
    return None


def _split_of(model):
    """accelerate's process split of a tinytorch model (imported in a tinytorch child only)."""
    from tinytorch.accel.processes import split_of

    return split_of(model)


def _generator(library: str, model, prompt: np.ndarray, cache: bool = True):
    if library != "torch":
        return lambda n: model.generate(prompt, n, temperature=0, use_cache=cache)
    import torch

    prompt_t = torch.from_numpy(prompt)
    return lambda n: model.generate(prompt_t, n).numpy()


def _generate(library: str, row: Row, cfg, workers: int = 1) -> dict:
    model = _build(library, cfg)
    prompt = np.random.default_rng(2).integers(0, cfg.vocab_size, size=(1, PROMPT_LEN))
    gen = _generator(library, model, prompt, row.cache)
    wall, cpu = _timed(lambda: gen(row.new_tokens), row.warmup, row.steps)
    return {
        "tok_s": row.new_tokens / float(np.median(wall)),
        "tok_s_cpu": row.new_tokens / float(np.median(cpu)),
    }


def _gpt2(library: str, row: Row, cfg, workers: int = 1) -> dict:
    """Inference at GPT-2-small size: a (1, seq_len) forward, then cached greedy generation."""
    model = _build(library, cfg)
    x = np.random.default_rng(3).integers(0, cfg.vocab_size, size=(1, row.seq_len))
    if library == "tinytorch":
        from tinytorch.core.autograd import no_grad

        def forward():
            with no_grad():
                model(x)
    else:
        import torch

        xt = torch.from_numpy(x)

        def forward():
            with torch.no_grad():
                model(xt)

    wall, cpu = _timed(forward, row.warmup, row.steps)
    gen = _generator(library, model, x[:, :PROMPT_LEN])
    gen_wall, gen_cpu = _timed(lambda: gen(row.new_tokens), 0, 1)
    return {
        "forward_ms": float(np.median(wall)) * 1e3,
        "forward_cpu_ms": float(np.median(cpu)) * 1e3,
        "tok_s": row.new_tokens / gen_wall[0],
        "tok_s_cpu": row.new_tokens / gen_cpu[0],
    }


def _conv(library: str, row: Row, cfg=None, workers: int = 1) -> dict:
    """One Conv2d layer with bias: forward, then backward of a fixed output gradient to the
    input, the weight and the bias (tinytorch's Conv2d of module 09; torch's F.conv2d)."""
    c_in, c_out, h, w, k, stride, padding = row.conv
    rng = np.random.default_rng(4)
    x = rng.standard_normal((row.batch, c_in, h, w)).astype(np.float32)
    out_h, out_w = ((n + 2 * padding - k) // stride + 1 for n in (h, w))
    g = rng.standard_normal((row.batch, c_out, out_h, out_w)).astype(np.float32)
    if library == "tinytorch":
        from tinytorch.core.spatial import Conv2d
        from tinytorch.core.tensor import Tensor

        np.random.seed(0)
        layer = Conv2d(c_in, c_out, k, stride=stride, padding=padding)

        def step():
            layer.zero_grad()
            xt = Tensor(x, requires_grad=True)
            layer(xt).backward(g)
    else:
        import torch
        import torch.nn.functional as F

        torch.manual_seed(0)
        weight = torch.nn.Parameter(torch.randn(c_out, c_in, k, k) / (c_in * k * k) ** 0.5)
        bias = torch.nn.Parameter(torch.zeros(c_out))
        gt = torch.from_numpy(g)

        def step():
            weight.grad = bias.grad = None
            xt = torch.from_numpy(x).requires_grad_(True)
            F.conv2d(xt, weight, bias, stride=stride, padding=padding).backward(gt)

    wall, cpu = _timed(step, row.warmup, row.steps)
    return {"step_ms": float(np.median(wall)) * 1e3, "step_cpu_ms": float(np.median(cpu)) * 1e3}


def _products(cfg, rows: int) -> list[tuple[int, int, int]]:
    """The (rows, in, out) shapes of a GPT's dense products in one training step: per layer the
    q, k, v projection (module 18 packs them into one), the attention's output projection and
    the MLP's two layers; then the tied output head."""
    c, h = cfg.embed_dim, int(cfg.embed_dim * cfg.mlp_ratio)
    return [(rows, c, 3 * c), (rows, c, c), (rows, c, h), (rows, h, c)] * cfg.num_layers + [
        (rows, c, cfg.vocab_size)
    ]


def _gemm(library: str, row: Row, cfg, workers: int = 1) -> dict:
    """The floor under a training step: its dense matrix products alone (each forward product,
    the gradient to its input and the gradient to its weight, written as module 03's Linear
    writes them), with each library's BLAS: numpy's OpenBLAS, PyTorch's MKL. No autograd, no
    other operation; the arrays are made once."""
    rng = np.random.default_rng(5)
    arrays = []
    for n, k, m in _products(cfg, row.batch * row.seq_len):
        x, w, g = (rng.standard_normal(s).astype(np.float32) for s in ((n, k), (k, m), (n, m)))
        arrays.append((x, w, g))
    if library == "torch":
        import torch

        arrays = [tuple(torch.from_numpy(a) for a in trio) for trio in arrays]

    def step():
        for x, w, g in arrays:
            x @ w  # forward
            g @ w.T  # to the input
            x.T @ g  # to the weight

    wall, cpu = _timed(step, row.warmup, row.steps)
    return {"step_ms": float(np.median(wall)) * 1e3, "step_cpu_ms": float(np.median(cpu)) * 1e3}


KINDS = {"train": _train, "generate": _generate, "gpt2": _gpt2, "conv": _conv, "gemm": _gemm}


def main(library: str, setting: str, row: Row) -> dict:
    if library not in ("tinytorch", PLAIN, SPLIT, "torch"):
        raise ValueError(f"library must be tinytorch, {PLAIN}, {SPLIT} or torch, got {library!r}")
    if library == "torch":
        # PyTorch as a user runs it: importing the preset table must not tune this process's
        # allocator the way tinytorch does for itself (tinytorch/core/allocator.py)
        os.environ["TINYTORCH_KEEP_FREED_MEMORY"] = "0"
        import torch

        torch.set_grad_enabled(True)
    if row.kind != "conv":
        from tinytorch.models.transformer import PRESETS  # noqa: F401 - the sizes, both sides

    threads, workers = parse_setting(setting)
    if workers > 1 and row.kind != "train":
        raise ValueError(f"setting {setting} is for training rows only")
    limit_threads(threads)
    cfg = config(row)
    baseline = peak_rss_kib()
    result = KINDS[row.kind](library, row, cfg, workers)
    result["peak_mib"] = (peak_rss_kib() - baseline) / 1024 + result.get("worker_mib", 0.0)
    result["baseline_mib"] = baseline / 1024
    return result


if __name__ == "__main__":
    lib, chosen, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    spec["libraries"] = tuple(spec.get("libraries", ()))
    print(json.dumps(main(lib, chosen, Row(**spec))))
