"""`tito milestone run translate`: an encoder-decoder learns to write number words as digits.

"four thousand and fifty two" -> "4052". The encoder reads the words (padded to the longest
source of the batch and masked), the decoder writes digits one at a time and looks back at the
words through cross-attention. Accuracy is exact match on numbers held out of training; the
alignment plot shows which words each digit was written from. The same task then trains the
post-norm variant (same seed, same batches, same steps) so the two can be compared.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from milestones import numbers, translate_plots
from milestones.errors import MilestoneError
from milestones.history import code_line
from milestones.output import prepare_out, write_json
from milestones.registry import Milestone, RunOptions
from tinytorch.core.attention import padding_mask
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Module
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.training import CosineSchedule, Trainer, seed_everything
from tinytorch.models.scaling import count_parameters
from tinytorch.models.seq2seq import Seq2SeqTransformer
from tinytorch.models.transformer import PRESETS

TARGET_ACCURACY = 0.95  # the milestone's bar for exact match on held-out numbers
CURVE_NUMBERS = 250  # held-out numbers scored at every evaluation (all of them at the end)


@dataclass(frozen=True)
class Training:
    """How a model size is trained on this task; the sizes themselves are PRESETS[name]."""

    batch_size: int
    steps: int  # the default when --steps is not given
    lr: float
    warmup: int
    test_size: int  # numbers held out of training, scored by exact match
    eval_every: int


TRAINING = {
    "nano": Training(32, 200, 3e-3, 20, 300, 50),  # --quick
    "tiny": Training(64, 800, 3e-3, 50, 1000, 50),  # the default
}


def settle(milestone: Milestone, opts: RunOptions) -> tuple[str, Training, int]:
    """Preset name, training setup and seed of this run; options that do not apply are errors."""
    opts.refuse(
        "translate",
        {
            "--data": "makes its own corpus",
            "--resume": "keeps no checkpoint",
            "--tokenizer": "writes number words and digits with a vocabulary of its own",
        },
    )
    name = opts.size(TRAINING, "nano", milestone.preset)
    setup = TRAINING[name] if opts.steps is None else replace(TRAINING[name], steps=opts.steps)
    seed = 0 if opts.seed is None else opts.seed
    if not 0 <= seed < 2**32:
        raise MilestoneError(f"--seed must be below 2**32, got {seed}", hint="e.g. --seed 1")
    return name, setup, seed


def source_mask(batch: numbers.Batch) -> np.ndarray:
    return padding_mask(batch.source_lengths, batch.source.shape[1])  # (B, 1, 1, S)


def build(name: str, seed: int, norm_first: bool) -> Seq2SeqTransformer:
    """PRESETS[name]'s sizes with this task's vocabulary and lengths, seeded."""
    size = PRESETS[name]
    seed_everything(seed)  # the same seed gives both norm placements the same initial weights
    return Seq2SeqTransformer(
        len(numbers.VOCAB),
        size.embed_dim,
        size.num_layers,
        size.num_heads,
        max_seq_len=max(numbers.MAX_SOURCE_LEN, numbers.MAX_TARGET_LEN),
        norm_first=norm_first,
    )


def translate(model, nums, use_cache: bool = True) -> list[str]:
    """Greedy digits the model writes for each number's words."""
    batch = numbers.batch(nums)
    out = model.generate(
        batch.source,
        numbers.START,
        numbers.MAX_TARGET_LEN - 1,
        source_mask(batch),
        use_cache=use_cache,
        stop_token=numbers.END,
    )
    return [numbers.decode(row[1:]) for row in out]


def exact_match(model, nums) -> float:
    """The share of `nums` whose digits the model writes exactly (greedy, cached)."""
    model.eval()
    wrote = translate(model, nums)
    model.train()
    return float(np.mean([w == str(n) for w, n in zip(wrote, nums)]))


@dataclass
class History:
    label: str
    norm_first: bool
    lr: float
    loss: list[float]
    accuracy: list[tuple[int, float]]  # (step, exact match on the first CURVE_NUMBERS held out)
    step_seconds: list[float]  # wall clock
    step_cpu_seconds: list[float]  # this process's CPU: what the step costs on an idle core
    reached: tuple[int, float, float] | None = None  # (step, wall s, CPU s) first at the target
    final_accuracy: float = 0.0  # exact match on every held-out number after the last step


class BatchReader(Module):
    """The model as module 07's Trainer calls it: one batch of numbers in, (B, T, V) logits out."""

    def __init__(self, model: Seq2SeqTransformer):
        self.model = model

    def forward(self, batch):
        return self.model(batch.source, batch.decoder_input, source_mask(batch))


def digits_loss(logits, labels):
    """Cross-entropy over the digits written, padding not counted."""
    return cross_entropy(logits, labels, ignore_index=numbers.PAD)


def train(model, train_nums, test_nums, config: Training, seed: int, label: str, bar) -> History:
    """AdamW with warm-up and cosine decay; batches drawn by `seed` alone, the same per variant."""
    lr = config.lr
    optimizer = AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warmup = min(config.warmup, config.steps // 5)  # a short --steps still warms up, briefly
    schedule = CosineSchedule(lr, warmup, config.steps, min_lr=lr / 10)
    rng = np.random.default_rng([seed, 1])
    trainer = Trainer(BatchReader(model), digits_loss, optimizer, schedule, max_norm=1.0)
    history = History(label, model.blocks[0].norm_first, lr, [], [], [], [])
    task = bar.add_task(label, total=config.steps, loss=float("nan"), acc="")
    for step in range(config.steps):
        tick, cpu = time.perf_counter(), time.process_time()
        batch = numbers.batch(rng.choice(train_nums, config.batch_size))
        loss = trainer.step(batch, batch.labels)
        history.step_seconds.append(time.perf_counter() - tick)
        history.step_cpu_seconds.append(time.process_time() - cpu)
        history.loss.append(loss)
        done = step + 1
        if done % config.eval_every == 0 or done == config.steps:
            acc = exact_match(model, test_nums[:CURVE_NUMBERS])
            history.accuracy.append((done, acc))
            if history.reached is None and acc >= TARGET_ACCURACY:
                history.reached = (done, sum(history.step_seconds), sum(history.step_cpu_seconds))
            shown = f"first {min(CURVE_NUMBERS, len(test_nums))} held-out {acc:.0%}"
            bar.update(task, acc=shown)
        # the mean of the last tenth of the steps so far: at the end, the table's final loss
        bar.update(task, completed=done, loss=np.mean(history.loss[-max(1, done // 10) :]))
    history.final_accuracy = exact_match(model, test_nums)
    bar.update(task, acc=f"all {len(test_nums):,} held-out {history.final_accuracy:.1%}")
    return history


def progress(console) -> Progress:
    return Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}  {task.fields[acc]}"),
        console=console,
    )


def pick_examples(test_nums) -> list[int]:
    """Held-out numbers whose alignment is worth a look: teens, a zero digit, all four digits."""
    wanted = (
        lambda n: n >= 100 and 13 <= n % 100 <= 19,  # one word, two digits
        lambda n: n >= 1000 and n // 100 % 10 == 0 and n % 100 > 20 and n % 10,  # a zero to write
        lambda n: n >= 1000 and n // 100 % 10 and n % 100 > 20 and n % 10,  # every place filled
        lambda n: n >= 1000 and n // 100 % 10 and n % 100 == 0,  # two trailing zeros
    )
    picked = [next((int(n) for n in test_nums if rule(int(n))), None) for rule in wanted]
    picked = [n for n in picked if n is not None]
    return picked or [int(n) for n in test_nums[:4]]


@no_grad()
def attention_maps(model, nums) -> dict:
    """Read the weights out of a teacher-forced pass over the model's own greedy output."""
    batch = numbers.batch(nums)
    mask = source_mask(batch)
    out = model.generate(
        batch.source, numbers.START, numbers.MAX_TARGET_LEN - 1, mask, stop_token=numbers.END
    )
    model(batch.source, out[:, :-1], mask)  # cached decoding equals this pass (tested)
    return {
        "source": [numbers.words(n) for n in nums],
        "written": [[numbers.VOCAB[i] for i in row[1:]] for row in out],
        "cross": [b.cross_attention.last_attention for b in model.blocks],  # (B, H, T, S) each
        "decoder_self": [b.self_attention.last_attention for b in model.blocks],  # (B, H, T, T)
        "encoder_self": [b.attention.last_attention for b in model.encoder.blocks],  # (B, H, S, S)
    }


def decoding_check(model, nums) -> tuple[list[str], dict]:
    """Greedy digits for `nums` with the KV cache, checked against decoding without it.

    Each way is timed twice, alternating, in CPU seconds (with one BLAS thread, what it takes on
    an idle core), and the faster time kept: the first call pays for fresh memory.
    """
    model.eval()
    seconds = {True: [], False: []}
    for use_cache in (True, False, True, False):
        began = time.process_time()
        wrote = translate(model, nums, use_cache=use_cache)
        seconds[use_cache].append(time.process_time() - began)
        if use_cache:
            cached = wrote
    return cached, {
        "cached_equals_uncached": cached == wrote,
        "numbers": len(nums),
        "cached_cpu_seconds": min(seconds[True]),
        "uncached_cpu_seconds": min(seconds[False]),
    }


def first_step_below(loss: list[float], level: float, window: int = 10) -> int | None:
    """The first step whose running-mean training loss is below `level`."""
    window = min(window, len(loss))
    smooth = np.convolve(loss, np.ones(window) / window, mode="valid")  # smooth[i]: steps i..i+w-1
    below = np.flatnonzero(smooth < level)
    return int(below[0]) + window if below.size else None


def variant_summary(h: History, test_acc: float) -> dict:
    return {
        "variant": h.label,
        "norm_first": h.norm_first,
        "lr": h.lr,
        "final_loss": h.loss[-1],
        "mean_loss_last_10pct": float(np.mean(h.loss[-max(1, len(h.loss) // 10) :])),
        "held_out_exact_match": test_acc,
        "accuracy_curve": h.accuracy,
        "reached_target_at_step": None if h.reached is None else h.reached[0],
        # the loss sits near 1.9 (digits guessed without reading the words) until the decoder
        # learns to use cross-attention; 0.1 is well past that plateau
        "loss_below_0.1_at_step": first_step_below(h.loss, 0.1),
        "train_seconds": sum(h.step_seconds),
    }


def run(milestone: Milestone, opts: RunOptions) -> dict:
    """The whole milestone; returns the summary it writes to <out>/summary.json."""
    name, config, seed = settle(milestone, opts)
    out, console = opts.out, opts.console
    prepare_out(out)
    opts.console.print(code_line(milestone.requires, opts.completed), highlight=False)
    load_before = os.getloadavg()[0]
    began, cpu = time.perf_counter(), time.process_time()
    train_nums, test_nums = numbers.split(seed, config.test_size)
    console.print(
        f"corpus: the numbers 0..{numbers.LARGEST} in words, {len(train_nums)} to train on, "
        f"{len(test_nums)} held out; e.g. '{' '.join(numbers.words(int(test_nums[-1])))}' -> "
        f"{int(test_nums[-1])}"
    )
    models, histories = [], []
    with progress(console) as bar:
        for label, norm_first in (("pre-norm", True), ("post-norm", False)):
            models.append(build(name, seed, norm_first))
            histories.append(train(models[-1], train_nums, test_nums, config, seed, label, bar))
    model = models[0]
    console.print(
        f"model: {count_parameters(model):,} parameters; preset {name}: "
        f"{PRESETS[name].num_layers} encoder and {PRESETS[name].num_layers} decoder layers, "
        f"embed_dim {PRESETS[name].embed_dim}, {PRESETS[name].num_heads} heads"
    )
    wrote, decoding = decoding_check(model, test_nums)
    accuracies = [h.final_accuracy for h in histories]  # the numbers the progress bars ended on
    mistakes = [
        {"number": int(n), "words": " ".join(numbers.words(int(n))), "wrote": w}
        for n, w in zip(test_nums, wrote)
        if w != str(int(n))
    ]
    examples = pick_examples(test_nums)
    maps = attention_maps(model, examples)
    files = [
        translate_plots.alignment(maps, out / "alignment.png").name,
        translate_plots.self_attention(maps, out / "self_attention.png").name,
        translate_plots.norm_comparison(histories, out / "norm_comparison.png").name,
        "summary.json",
    ]
    main = histories[0]
    step_ms, step_cpu_ms = (
        1000 * np.array(main.step_seconds),
        1000 * np.array(main.step_cpu_seconds),
    )
    summary = {
        "milestone": "translate",
        "task": f"English number words -> digits, 0..{numbers.LARGEST}",
        "preset": name,
        "training": asdict(config),
        "seed": seed,
        "corpus": {
            "train": len(train_nums),
            "held_out": len(test_nums),
            "vocab_size": len(numbers.VOCAB),
            "max_source_len": numbers.MAX_SOURCE_LEN,
        },
        "parameters": count_parameters(model),
        "held_out_exact_match": accuracies[0],
        "target_exact_match": TARGET_ACCURACY,
        "reached_target": None
        if main.reached is None
        else dict(zip(("step", "train_seconds", "train_cpu_seconds"), main.reached)),
        "train_seconds": sum(main.step_seconds),
        "train_cpu_seconds": sum(main.step_cpu_seconds),
        # one BLAS thread: a step's CPU time is its wall time on an idle core, whatever the load
        "step_ms": {
            "median": float(np.median(step_ms)),
            "median_cpu": float(np.median(step_cpu_ms)),
        },
        "mistakes": mistakes[:20],
        "mistake_count": len(mistakes),
        "decoding": decoding,
        "norm_comparison": [variant_summary(h, a) for h, a in zip(histories, accuracies)],
        "alignment_examples": [
            {"number": n, "words": " ".join(s), "wrote": "".join(w).split("</s>")[0]}
            for n, s, w in zip(examples, maps["source"], maps["written"])
        ],
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
        "seconds": time.perf_counter() - began,
        "cpu_seconds": time.process_time() - cpu,
        "files": files,
    }
    write_json(out / "summary.json", summary)
    show(summary, console)
    return summary


def show(summary: dict, console) -> None:
    table = Table(
        title="pre-norm against post-norm: same seed, batches and steps", title_justify="left"
    )
    columns = ("variant", "loss < 0.1 at step", "95% at step", "final loss", "held-out exact")
    for column in columns:
        table.add_column(column, justify="left" if column == "variant" else "right")
    for v in summary["norm_comparison"]:
        low, reached = v["loss_below_0.1_at_step"], v["reached_target_at_step"]
        table.add_row(
            v["variant"],
            "-" if low is None else str(low),
            "-" if reached is None else str(reached),
            f"{v['mean_loss_last_10pct']:.4f}",
            f"{v['held_out_exact_match']:.1%}",
        )
    console.print(table)
    for ex in summary["alignment_examples"]:
        console.print(f"  {ex['words']:<48} -> {ex['wrote']}")
    d, held_out, ms = summary["decoding"], summary["corpus"]["held_out"], summary["step_ms"]
    console.print(
        f"held-out exact match {summary['held_out_exact_match']:.1%} "
        f"({held_out - summary['mistake_count']} of {held_out}); training "
        f"{summary['train_seconds']:.1f} s, median step {ms['median']:.1f} ms "
        f"({ms['median_cpu']:.1f} ms of CPU; load average {summary['load_average']['before']:.1f})"
    )
    reached = summary["reached_target"]
    if reached is not None:
        console.print(
            f"pre-norm reached {TARGET_ACCURACY:.0%} on the first {CURVE_NUMBERS} held-out numbers "
            f"at step {reached['step']}, after {reached['train_seconds']:.1f} s of training "
            f"({reached['train_cpu_seconds']:.1f} s of CPU)"
        )
    console.print(
        f"decoding: cached {'equals' if d['cached_equals_uncached'] else 'DIFFERS FROM'} uncached "
        f"on all {d['numbers']} ({d['cached_cpu_seconds']:.2f} s of CPU against "
        f"{d['uncached_cpu_seconds']:.2f} s)"
    )
