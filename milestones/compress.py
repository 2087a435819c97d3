"""`tito milestone run compress`: the GPT of `run gpt`, quantized, pruned, factorised, distilled.

It reads a finished `runs/gpt` (`runs/gpt-quick` with --quick): the checkpoint, and the corpus
and tokenizer rebuilt from what the checkpoint records (checked against its fingerprints), so the
validation windows are the very ones the run was scored on. When there is no such run it trains
a small one first, with the GPT milestone itself, into <out>/teacher. Then every variant of
modules 15 and 16 is scored the same way and written to one table, one plot and a summary.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from milestones import plots, provenance, runs, tokens, training
from milestones.corpus import split
from milestones.output import keep_earlier, prepare_out, write_json
from milestones.registry import Milestone, RunOptions
from tinytorch.compress.distillation import distill_step, half_size
from tinytorch.compress.lowrank import factorize
from tinytorch.compress.pruning import linears, prune, prune_structure, sparse_bytes
from tinytorch.compress.quantization import calibrate, model_bytes, quantize_model
from tinytorch.core.autograd import no_grad
from tinytorch.core.checkpoint import write_atomic
from tinytorch.core.embeddings import Embedding
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import CosineSchedule, Trainer, seed_everything
from tinytorch.data.loader import LanguageModelDataset
from tinytorch.models.scaling import count_parameters
from tinytorch.models.transformer import GPT

RUN_FILES = ("summary.json", "table.md", "pareto.png")
# whose code each part of the table runs (the run's header names yours or the reference's)
CODE = {"the GPT": 13, "training": 7, "quantization": 15, "pruning, low rank, distillation": 16,
        "caching": 17}  # fmt: skip
PROMPT = "The"
GOAL = 0.02  # int8 per-channel: validation bits/char within 2 % of the original's


@dataclass(frozen=True)
class Setup:
    eval_windows: int  # validation windows every variant is scored on (the same ones)
    batch_size: int
    distill_steps: int  # default when --steps is not given
    distill_lr: float
    sample_tokens: int
    teacher: str  # the preset trained when there is no finished GPT run
    teacher_steps: int


FULL = Setup(256, 32, 300, 1e-3, 200, "tiny", 600)
QUICK = Setup(32, 16, 20, 2e-3, 60, "nano", 60)


@dataclass
class Run:
    """A finished GPT run, reloaded: its model, tokenizer and data split."""

    folder: Path
    model: GPT
    vocab: tokens.Tokens
    train: LanguageModelDataset
    val: LanguageModelDataset
    to_bits_per_char: float
    meta: dict


def source_folder(opts: RunOptions) -> Path:
    """runs/gpt next to --out (runs/gpt-quick for --quick)."""
    return opts.out.parent / ("gpt-quick" if opts.quick else "gpt")


def load_run(folder: Path, data_dir: Path | None) -> Run:
    """The model, tokenizer and train/validation split of a finished `tito milestone run gpt`."""
    found = runs.load_run(folder, data_dir)
    sizes = found.config
    ids = found.vocab.encode(found.corpus.text)
    train_ids, val_ids = split(ids, sizes.max_seq_len, found.meta["seed"])
    to_bpc = tokens.bits_per_char(1.0, len(val_ids), len(found.vocab.decode(val_ids)))
    return Run(
        folder,
        found.model,
        found.vocab,
        LanguageModelDataset(train_ids, sizes.max_seq_len),
        LanguageModelDataset(val_ids, sizes.max_seq_len),
        to_bpc,
        found.meta,
    )


# the options a milestone that works on a finished GPT run has no use for, and why
ON_A_TRAINED_RUN = {
    "--resume": "has no training to resume",
    "--tokenizer": "uses the trained run's tokenizer",
    "--data": "uses the trained run's corpus",
    "--config": "uses the trained run's model size",
}


def trained_gpt(opts: RunOptions, setup: Setup) -> Path:
    """The finished GPT run to work on: runs/gpt (or gpt-quick), else <out>/teacher, trained
    there first when it is not there either. An unfinished run in runs/gpt is refused, naming
    its step, unless --allow-partial; an unfinished teacher is trained again."""
    source = source_folder(opts)
    if (source / training.CHECKPOINT).is_file():
        runs.require_finished(source, opts.allow_partial)
        return source
    teacher = opts.out / "teacher"
    if runs.finished(teacher):
        return teacher
    return train_teacher(opts, setup)


def train_teacher(opts: RunOptions, setup: Setup) -> Path:
    """No finished GPT run: train a small one with the GPT milestone into <out>/teacher."""
    from milestones.registry import find

    folder = opts.out / "teacher"
    opts.console.print(
        f"no finished GPT run in {source_folder(opts)}: training a {setup.teacher} one "
        f"({setup.teacher_steps} steps) into {folder} first"
    )
    gpt = find("gpt")
    gpt.run(
        RunOptions(
            folder,
            quick=True,  # the short reports; the size and steps are chosen here
            steps=setup.teacher_steps,
            seed=opts.seed,
            config=setup.teacher,
            tokenizer="char",
            data_dir=opts.data_dir,
            completed=opts.completed,
            console=opts.console,
        )
    )
    return folder


def scored(model, run: Run, setup: Setup) -> tuple[float, float]:
    """(validation bits per character, tokens scored per second) on the same windows for all."""
    began = time.perf_counter()
    loss = training.evaluate(model, run.val, setup.eval_windows, setup.batch_size)
    seconds = time.perf_counter() - began
    windows = min(setup.eval_windows, len(run.val))
    return loss * run.to_bits_per_char, windows * run.val.seq_len / seconds


def sample(model, run: Run, setup: Setup, seed: int, cached: bool) -> tuple[str, float]:
    """A sample from the prompt (temperature 0.7, top-k 20) and the tokens per second it took."""
    ids = run.vocab.encode(PROMPT)[None, :]
    began = time.perf_counter()
    out = model.generate(
        ids, setup.sample_tokens, temperature=0.7, top_k=20, seed=seed, use_cache=cached
    )
    seconds = time.perf_counter() - began
    return run.vocab.decode(out[0]), setup.sample_tokens / seconds


def tables(model) -> list[Embedding]:
    """The model's learned embedding tables (tokens, and positions unless sinusoidal)."""
    found = [model.token_embedding, model.position_embedding]
    return [e for e in found if isinstance(e, Embedding)]


def nonzero(model) -> int:
    """Parameters that are not exactly zero (pruning's zeros are not stored sparse)."""
    return sum(int(np.count_nonzero(p.data)) for p in model.parameters())


def warmup_steps(steps: int) -> int:
    """A tenth of the steps warm up, at least one, and never all of them (`--steps 2` fine-tunes
    a pruned model for one step: no warmup then)."""
    return min(max(1, steps // 10), steps - 1)


def distill(teacher, run: Run, setup: Setup, steps: int, seed: int) -> tuple[GPT, list[float]]:
    """A student with every other block of `teacher`, trained on its softened logits."""
    student = half_size(teacher)
    student.train()
    optimizer = AdamW(student.parameters(), lr=setup.distill_lr, weight_decay=0.01)
    schedule = CosineSchedule(setup.distill_lr, warmup_steps(steps), steps, setup.distill_lr / 10)
    losses = []  # module 16's distill_step: the teacher's logits, then module 07's train_step
    for step in range(steps):
        optimizer.lr = schedule(step)
        x, y = training.batch_at(run.train, seed + 1, step, setup.batch_size)
        losses.append(distill_step(student, teacher, Tensor(x), y, optimizer, 2.0, 0.5))
    student.eval()
    return student, losses


def fine_tune(model, run: Run, setup: Setup, steps: int, seed: int, lr: float) -> GPT:
    """Steps of the ordinary next-token loss on the run's training windows, cosine schedule."""
    optimizer = AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = CosineSchedule(lr, warmup_steps(steps), steps, lr / 10)
    trainer = Trainer(model, cross_entropy, optimizer, schedule)
    for step in range(steps):
        x, y = training.batch_at(run.train, seed + 1, step, setup.batch_size)
        trainer.step(Tensor(x), y)
    model.eval()
    return model


def variants(run: Run, setup: Setup, steps: int, seed: int, console):
    """(name, model, stored bytes, stored numbers, cached generation) for every variant."""
    model = run.model
    params = count_parameters(model)
    yield "original (float32)", model, model_bytes(model), params, True
    for name, bits, per_channel in (
        ("int8 per-channel", 8, True),
        ("int8 per-tensor", 8, False),
        ("int4 per-channel", 4, True),
    ):
        quantized = quantize_model(model, bits=bits, per_channel=per_channel)
        yield name, quantized, model_bytes(quantized), params, True
    batches = [training.batch_at(run.train, seed + 3, i, setup.batch_size)[0] for i in range(4)]
    static = quantize_model(model, calibration=calibrate(model, batches))
    yield "int8 weights + calibrated int8 inputs", static, model_bytes(static), params, True
    for fraction in (0.5, 0.8):
        pruned = copy.deepcopy(model)
        prune(pruned, fraction, scope="global")
        name = f"pruned {fraction:.0%} (global magnitude)"
        yield name, pruned, sparse_bytes(pruned), nonzero(pruned), True
    slim = copy.deepcopy(model)
    prune_structure(slim, head_fraction=0.5, neuron_fraction=0.5)
    # module 17's cache merges heads to H * D columns: a head-pruned GPT caches like the others
    yield "heads and MLP neurons halved", slim, model_bytes(slim), count_parameters(slim), True
    low = factorize(model, ratio=0.25)
    yield "low rank (SVD, 1/4 rank)", low, model_bytes(low), count_parameters(low), True
    tune_steps = max(1, steps // 3)
    tuned = fine_tune(copy.deepcopy(low), run, setup, tune_steps, seed, setup.distill_lr / 3)
    name = f"low rank + {tune_steps} steps"
    yield name, tuned, model_bytes(tuned), count_parameters(tuned), True
    began = time.perf_counter()
    student, _ = distill(model, run, setup, steps, seed)
    console.print(f"distilled the half-size student in {time.perf_counter() - began:.1f} s")
    name = f"distilled half-size ({steps} steps)"
    yield name, student, model_bytes(student), count_parameters(student), True
    # the control: the same start, batches, steps and schedule, the hard targets only
    alone = fine_tune(half_size(model), run, setup, steps, seed, setup.distill_lr)
    name = f"half-size, no teacher ({steps} steps)"
    yield name, alone, model_bytes(alone), count_parameters(alone), True


def pareto_plot(rows: list[dict], path: Path) -> Path:
    """Validation bits/char against stored bytes; the Pareto front joined by a line."""
    return plots._save(pareto_figure(rows), path)


def pareto_figure(rows: list[dict]):
    fig, ax = plots.plt.subplots(figsize=(10, 5), layout="constrained")
    front = pareto_front(rows)
    numbers = []
    for number, row in enumerate(rows, start=1):
        best = row["name"] in front
        point = (row["bytes"], row["bits_per_char"])
        ax.scatter(
            *point, color="tab:red" if best else "tab:blue", label=f"{number}  {row['name']}"
        )
        numbers.append(
            ax.annotate(str(number), point, fontsize=8, xytext=(4, 3), textcoords="offset points")
        )
    points = sorted((r["bytes"], r["bits_per_char"]) for r in rows if r["name"] in front)
    ax.plot(*zip(*points), color="tab:red", alpha=0.5)
    ax.set_xscale("log")
    ax.set(xlabel="bytes stored", ylabel="validation bits per character",
           title="Compressing the GPT: size against quality (red: the Pareto front)")  # fmt: skip
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    plots.keep_apart(fig, numbers)  # variants of nearly equal size and quality share a spot
    return fig


def pareto_front(rows: list[dict]) -> set[str]:
    """Names of the rows no other row beats on both bytes and bits/char."""
    return {
        r["name"]
        for r in rows
        if not any(
            o["bytes"] <= r["bytes"]
            and o["bits_per_char"] <= r["bits_per_char"]
            and (o["bytes"], o["bits_per_char"]) != (r["bytes"], r["bits_per_char"])
            for o in rows
        )
    }


def table(rows: list[dict], goal: dict) -> str:
    """The Markdown table and the samples, as milestones/RESULTS.md shows them."""
    base = rows[0]
    lines = [
        "| variant | parameters | bytes | vs float32 | val bits/char | change | scored tok/s "
        "| generated tok/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        change = r["bits_per_char"] / base["bits_per_char"] - 1
        lines.append(
            f"| {r['name']} | {r['parameters']:,} | {r['bytes']:,} | "
            f"{r['bytes'] / base['bytes']:.1%} | {r['bits_per_char']:.3f} | {change:+.1%} | "
            f"{r['scored_tokens_per_second']:,.0f} | {r['generated_tokens_per_second']:,.0f} |"
        )
    verdict = "met" if goal["met"] else "missed"
    lines += [
        "",
        f"Goal, int8 per-channel within {GOAL:.0%} of the original's bits/char: **{verdict}** "
        f"({goal['change']:+.2%}).",
        "",
        'Samples (prompt "The", temperature 0.7, top-k 20, the same seed for every variant):',
        "",
    ]
    for r in rows:
        text = r["sample"].replace("\n", " ").replace("|", "/")
        lines.append(f"- **{r['name']}**: `{text}`")
    return "\n".join(lines) + "\n"


def run(milestone: Milestone, opts: RunOptions) -> dict:
    """The whole milestone; returns the summary it writes to <out>/summary.json."""
    opts.refuse(milestone.name, ON_A_TRAINED_RUN)
    console = opts.console
    setup = QUICK if opts.quick else FULL
    steps = opts.steps if opts.steps is not None else setup.distill_steps
    seed = opts.seed if opts.seed is not None else 0
    began = time.perf_counter()
    prepare_out(opts.out)
    kept = keep_earlier(opts.out, list(RUN_FILES))
    if kept is not None:
        console.print(f"the earlier run in {opts.out} was moved to {kept}", highlight=False)
    folder = trained_gpt(opts, setup)
    gpt_run = load_run(folder, opts.data_dir)
    console.print(provenance.code_line(CODE, opts.completed), highlight=False)
    c = gpt_run.model.config
    console.print(
        f"compressing the GPT of {folder}: embed {c.embed_dim}, {c.num_layers} layers, "
        f"{c.num_heads} heads, vocabulary {c.vocab_size} ({gpt_run.vocab.kind}); scoring "
        f"{min(setup.eval_windows, len(gpt_run.val))} validation windows of {c.max_seq_len} tokens"
    )
    seed_everything(seed)
    rows = []
    for name, model, stored, numbers, cached in variants(gpt_run, setup, steps, seed, console):
        bpc, scored_tps = scored(model, gpt_run, setup)
        with no_grad():
            text, generated_tps = sample(model, gpt_run, setup, seed, cached)
        rows.append(
            {
                "name": name,
                "parameters": int(numbers),
                "bytes": int(stored),
                "bits_per_char": float(bpc),
                "scored_tokens_per_second": float(scored_tps),
                "generated_tokens_per_second": float(generated_tps),
                "kv_cache": cached,
                "sample": text,
            }
        )
        console.print(
            f"{name:<36} {int(numbers):>9,} numbers {int(stored):>10,} bytes  {bpc:.3f} bits/char",
            highlight=False,
        )
    change = rows[1]["bits_per_char"] / rows[0]["bits_per_char"] - 1
    goal = {"target": GOAL, "change": change, "met": bool(change <= GOAL)}
    markdown = table(rows, goal)
    write_atomic(opts.out / "table.md", lambda handle: handle.write(markdown.encode()))
    files = [pareto_plot(rows, opts.out / "pareto.png")]
    summary = {
        "milestone": milestone.name,
        "source": str(folder),
        "config": gpt_run.meta["config"],
        "quick": opts.quick,
        "seed": seed,
        "distill_steps": steps,
        "eval_windows": min(setup.eval_windows, len(gpt_run.val)),
        "linear_weights": sum(m.weight.size for _, m in linears(gpt_run.model)),
        "linear_layers": len(linears(gpt_run.model)),
        "linear_channels": sum(m.out_features for _, m in linears(gpt_run.model)),
        "embedding_weights": sum(e.weight.size for e in tables(gpt_run.model)),
        "embedding_rows": sum(e.num_embeddings for e in tables(gpt_run.model)),
        "rows": rows,
        "goal_int8_per_channel": goal,
        "pareto_front": sorted(pareto_front(rows)),
        "seconds": time.perf_counter() - began,
        "files": [p.name for p in files] + ["table.md", "summary.json"],
    }
    write_json(opts.out / "summary.json", summary)
    console.print(markdown, markup=False, highlight=False)
    return summary
