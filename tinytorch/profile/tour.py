"""Module 14's tour: the GPT you trained, profiled step by step on this machine.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: module 14's notebook calls `tour()`
after the lesson. It profiles the GPT of `tito milestone run gpt` when its run folder exists
(`runs/gpt`, or `runs/gpt-quick` from `--quick`, found from the current folder upwards) and a
small fresh GPT otherwise, and prints: a training step's time with numpy's default BLAS threads
and with one, the operation table against this machine's roofs, the counted matmul FLOPs beside
`gpt_step_flops`, the kept activations per layer, a generation's table, and `x**3` against
`x*x*x`. Measurements run on one BLAS thread: on a shared machine, BLAS threads wait for each
other and a small multiply can take ten times longer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import load_checkpoint
from tinytorch.models.scaling import count_parameters
from tinytorch.models.transformer import GPT, GPTConfig
from tinytorch.profile.flops import gpt_step_flops, parameter_counts
from tinytorch.profile.profiler import Profiler, latency
from tinytorch.profile.report import machine_rates, operation_table, plot_roofline, plot_time
from tinytorch.profile.runs import profile_generation, profile_step


def trained_gpt(start: Path | None = None):
    """(model, batch size, where it came from): the milestone's GPT, or a fresh small one."""
    here = Path.cwd() if start is None else Path(start)
    for folder in (here, *here.parents):
        for run in ("runs/gpt", "runs/gpt-quick"):
            path = folder / run / "checkpoint.npz"
            if path.is_file():
                with np.load(path) as archive:
                    key = next(k for k in archive.files if k.endswith("milestone_meta"))
                    meta = json.loads(archive[key].tobytes().decode())["config"]
                fields = GPTConfig.__dataclass_fields__
                model = GPT(**{k: v for k, v in meta.items() if k in fields})
                load_checkpoint(path, model)
                return model, meta["batch_size"], str(path)
    np.random.seed(0)
    return GPT(vocab_size=96, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=64,
               tie_weights=True), 16, "a fresh GPT (no milestone run found)"  # fmt: skip


def one_thread():
    """A context in which numpy's BLAS runs one thread."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1, user_api="blas")


def tour(show=print, model=None, batch: int = 16, new_tokens: int = 32) -> dict:
    """Profile a GPT (the milestone's when `model` is None) and `show` each finding; returns
    the numbers and figures: {"step", "generation", "rates", "figures"}."""
    if model is None:
        model, batch, origin = trained_gpt()
    else:
        origin = "the given model"
    config = model.config
    show(f"{origin}: {count_parameters(model):,} parameters")
    show(parameter_counts(model, depth=2))
    rng = np.random.default_rng(0)
    x = rng.integers(0, config.vocab_size, size=(batch, config.max_seq_len))
    y = rng.integers(0, config.vocab_size, size=(batch, config.max_seq_len))

    def train_step():
        cross_entropy(model(Tensor(x)), y).backward()
        model.zero_grad()

    threads = latency(train_step, warmup=1, repeats=5)
    with one_thread():
        single = latency(train_step, warmup=1, repeats=5)
        rates = machine_rates()
        step = profile_step(model, x, y, AdamW(model.parameters(), lr=1e-4))
    show(f"one training step: {threads} with numpy's default threads, {single} with one")
    show(f"one BLAS thread: {rates['matmul_gflops']:.1f} GFLOP/s matmul, "
         f"{rates['copy_gbytes']:.1f} GB/s copy")  # fmt: skip
    show(operation_table(step.rows, rates, top=14))
    totals = step.profiler.totals()
    analytic = gpt_step_flops(config, batch, config.max_seq_len)
    show(f"matmul FLOPs of one step: counted {totals['matmul_flops'] // step.repeats:,}, "
         f"analytic {analytic['total']:,}")  # fmt: skip
    rate = (totals["matmul_flops"] + totals["other_flops"]) / step.wall_seconds / 1e9
    show(f"whole step: {rate:.2f} GFLOP/s, {rate / rates['matmul_gflops']:.1%} of the matmul roof")
    show(f"activations kept {step.profiler.peak_bytes / 1e6:.1f} MB; "
         f"traced peak of the step {step.traced_peak_bytes / 1e6:.1f} MB")  # fmt: skip
    kept = list(step.profiler.kept_by_layer().items())[:8]  # over every repeat
    show({k: f"{v / step.repeats / 1e6:.2f} MB" for k, v in kept})
    prompt = x[:1, :8]
    with one_thread():
        generation = profile_generation(model, prompt, new_tokens=new_tokens)
        whole = latency(lambda: model.generate(prompt, new_tokens, temperature=0), 1, 5)
    show(operation_table(generation.rows, rates, top=10))
    show(f"generating {new_tokens} tokens: {whole}, {new_tokens / whole.median:.0f} tokens/s")
    cube = np.random.default_rng(0).standard_normal((16, 64, 256), dtype=np.float32)
    with one_thread():
        power = latency(lambda: cube**3, warmup=2, repeats=7)
        product = latency(lambda: cube * cube * cube, warmup=2, repeats=7)
    show(f"x**3: {power}; x*x*x: {product}; {power.median / product.median:.0f}x")
    figures = {"step": plot_time(step.rows, "training step"),
               "roofline": plot_roofline(step.rows, rates, "training step"),
               "generation": plot_time(generation.rows, f"generating {new_tokens} tokens")}  # fmt: skip
    return {"step": step, "generation": generation, "rates": rates, "figures": figures}


__all__ = ["trained_gpt", "one_thread", "tour"]
