"""Forward, training step and generation timings of both implementations, interleaved."""

from __future__ import annotations

import time

import numpy as np
import torch

from benchmarks.common import (
    GEN_CONTEXT,
    PROMPT_LEN,
    BenchConfig,
    TinyTrainer,
    TorchTrainer,
    batches,
    build_pair,
    interleaved,
    numpy_matmul_seconds,
    stats,
    train_flops,
)
from tinytorch.core.autograd import no_grad


def forward_and_train(cfg: BenchConfig, warmup: int, reps: int) -> dict:
    """Inference forward (no graph) and one full training step, medians over `reps`."""
    ours, ref = build_pair(cfg)
    (x, _), *_ = batches(cfg, 1)
    xt = torch.from_numpy(x)

    def forward_ours():
        with no_grad():
            ours(x)

    def forward_ref():
        with torch.no_grad():
            ref(xt)

    forward = interleaved({"tinytorch": forward_ours, "torch": forward_ref}, warmup, reps)
    ours_t, ref_t = TinyTrainer(ours), TorchTrainer(ref)
    data = batches(cfg, warmup + reps, seed=1)
    cursor = {"tinytorch": 0, "torch": 0}

    def stepper(name, trainer):
        def step():
            xb, yb = data[cursor[name] % len(data)]
            cursor[name] += 1
            trainer.step(xb, yb)

        return step

    train = interleaved(
        {"tinytorch": stepper("tinytorch", ours_t), "torch": stepper("torch", ref_t)}, warmup, reps
    )
    flops = train_flops(cfg)
    numpy_seconds = numpy_matmul_seconds(cfg)
    numpy_gflops = flops["total"] / numpy_seconds / 1e9
    throughput = {}
    for name, t in train.items():
        gflops = flops["total"] / (t["median_ms"] / 1e3) / 1e9
        throughput[name] = {"gflops": gflops, "share_of_numpy_matmul": gflops / numpy_gflops}
    return {"forward": forward, "train_step": train, "flops": flops,
            "numpy_matmul_ms": numpy_seconds * 1e3, "numpy_matmul_gflops": numpy_gflops,
            "throughput": throughput}  # fmt: skip


def generation(cfg: BenchConfig, new_tokens: int, reps: int) -> dict:
    """Greedy tokens/s at batch 1 from a 16-token prompt, with and without the KV cache."""
    ours, ref = build_pair(cfg, max_seq_len=GEN_CONTEXT)
    prompt = np.random.default_rng(2).integers(0, cfg.vocab_size, size=(1, PROMPT_LEN))
    prompt_t = torch.from_numpy(prompt)

    def run(name: str, cached: bool, tokens: int):
        if name == "tinytorch":
            return ours.generate(prompt, tokens, temperature=0, use_cache=cached)
        return ref.generate(prompt_t, tokens, temperature=0, use_cache=cached).numpy()

    cases = [(name, cached) for cached in (True, False) for name in ("tinytorch", "torch")]
    for name, cached in cases:  # warm-up: 8 generated tokens is 8 forward steps
        run(name, cached, 8)
    times = {case: [] for case in cases}
    outputs = {}
    for _ in range(reps):
        for case in cases:
            start = time.perf_counter()
            outputs[case] = run(*case, new_tokens)
            times[case].append(time.perf_counter() - start)
    out: dict = {"new_tokens": new_tokens, "context": GEN_CONTEXT}
    for name, cached in cases:
        s = stats(times[name, cached])
        s["tokens_per_s"] = new_tokens / (s["median_ms"] / 1e3)
        out[f"{name}_{'cached' if cached else 'uncached'}"] = s
    for name in ("tinytorch", "torch"):
        out[f"{name}_cache_speedup"] = (
            out[f"{name}_cached"]["tokens_per_s"] / out[f"{name}_uncached"]["tokens_per_s"]
        )
    ours_ids, ref_ids = outputs["tinytorch", True][0], outputs["torch", True][0]
    out["cache_equals_uncached"] = bool(np.array_equal(ours_ids, outputs["tinytorch", False][0]))
    out["greedy_tokens_equal_to_torch"] = int((ours_ids == ref_ids).cumprod().sum()) - PROMPT_LEN
    return out
