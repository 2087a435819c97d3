"""`tito milestone run llama`: a Llama and a GPT of the same size, on the same text and CPU time.

Both models take their width, depth, heads and context from one row of tinytorch's `PRESETS`;
the Llama's SwiGLU width is chosen so that its parameter count equals the GPT's (it has no
position table and fewer attention weights, so it spends them in the feed-forward). Each trains
on the same batches, in order, until it has used the same CPU time; then both are scored in bits
per character on the same held-out text, timed while training and generating, and measured for
the KV cache each keeps per token (grouped-query attention's saving). Both run the plain lesson
code (no module 18 kernels for either), so the comparison is of the architectures alone.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import numpy as np
from rich.markup import escape
from rich.table import Table

from milestones import runs, tokens, training
from milestones.corpus import Corpus, default_corpus, read_corpus, split
from milestones.history import code_line
from milestones.output import keep_earlier, prepare_out, write_json
from milestones.registry import Milestone, RunOptions
from tinytorch.core.autograd import no_grad
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import seed_everything, train_step
from tinytorch.data.loader import LanguageModelDataset
from tinytorch.memo.generation import cached_forward, new_caches
from tinytorch.memo.kvcache import cache_bytes
from tinytorch.models.llama import Llama, LlamaConfig, llama_config
from tinytorch.models.scaling import count_parameters
from tinytorch.models.transformer import GPT, PRESETS

PROMPT = "The"
RUN_FILES = ("summary.json", runs.CHECKPOINT, "llama.png")


@dataclass(frozen=True)
class Budget:
    """How a size is trained; the sizes themselves are PRESETS[name]."""

    batch_size: int
    cpu_seconds: float  # each model trains until it has used this much CPU time
    lr: float
    warmup: int  # steps of linear warm-up, then a constant rate
    eval_windows: int
    evals: int  # validation points on the curve, evenly spread over the budget
    sample_tokens: int


BUDGETS = {
    "nano": Budget(8, 2.0, 3e-3, 5, 32, 2, 40),  # tests
    "tiny": Budget(16, 12.0, 3e-3, 20, 256, 4, 120),  # --quick
    "small": Budget(32, 120.0, 3e-3, 50, 1024, 8, 240),
}


def settle(milestone: Milestone, opts: RunOptions) -> tuple[str, Budget, int]:
    opts.refuse(
        "llama",
        {
            "--resume": "keeps one checkpoint, of the Llama, for export only",
            "--tokenizer": "reads characters, so that bits per character compare directly",
            "--steps": "trains each model for the same CPU time, not the same steps",
        },
    )
    name = opts.size(BUDGETS, "tiny", milestone.preset)
    return name, BUDGETS[name], 0 if opts.seed is None else opts.seed


def matched_llama(name: str, vocab_size: int, target: int) -> LlamaConfig:
    """PRESETS[name] with Llama's parts, half as many kv heads, and the SwiGLU width (a multiple
    of 8) that brings the parameter count nearest to `target`."""
    config = llama_config(name, vocab_size=vocab_size)
    config = replace(config, num_kv_heads=max(1, config.num_heads // 2))
    c, head_dim = config, config.embed_dim // config.num_heads
    per_block = 2 * c.embed_dim + 2 * c.embed_dim**2 + 2 * c.embed_dim * c.num_kv_heads * head_dim
    rest = c.vocab_size * c.embed_dim * (1 if c.tie_weights else 2) + c.embed_dim
    hidden = (target - rest - c.num_layers * per_block) / (3 * c.embed_dim * c.num_layers)
    return replace(config, hidden_dim=max(8, int(round(hidden / 8)) * 8))


def kv_bytes_per_token(model, steps: int) -> float:
    """Measured bytes of the KV caches after reading `steps` positions, per position."""
    prompt = np.zeros((1, steps), dtype=np.int64)
    with no_grad():
        if isinstance(model, Llama):
            caches = model.new_caches()
            model(prompt, caches)
        else:
            caches = new_caches(model)
            cached_forward(model, prompt, caches)
    return cache_bytes(caches) / steps  # the buffers hold exactly `steps` positions here


def train(model, data: LanguageModelDataset, val: LanguageModelDataset, budget: Budget,
          seed: int, to_bits: float) -> tuple[dict, AdamW]:  # fmt: skip
    """AdamW on the batches of (seed, step) until the CPU budget is spent; evaluation is not
    charged to it. Returns the curve and the rates, and the optimizer."""
    optimizer = AdamW(model.parameters(), lr=budget.lr, weight_decay=0.01)
    curve, losses = [], []
    cpu = wall = 0.0
    step, next_eval = 0, 0.0
    while cpu < budget.cpu_seconds:
        if cpu >= next_eval:
            bits = training.evaluate(model, val, budget.eval_windows, budget.batch_size) * to_bits
            curve.append((round(cpu, 3), bits))
            next_eval += budget.cpu_seconds / budget.evals
        x, y = training.batch_at(data, seed, step, budget.batch_size)
        began_cpu, began_wall = time.process_time(), time.perf_counter()
        optimizer.lr = budget.lr * min(1.0, (step + 1) / budget.warmup)
        loss = train_step(model, cross_entropy, optimizer, Tensor(x), y, max_norm=1.0)
        cpu += time.process_time() - began_cpu
        wall += time.perf_counter() - began_wall
        losses.append(loss)
        step += 1
    bits = training.evaluate(model, val, budget.eval_windows, budget.batch_size) * to_bits
    curve.append((round(cpu, 3), bits))
    trained = step * budget.batch_size * data.seq_len
    result = {"steps": step, "cpu_seconds": cpu, "wall_seconds": wall,
              "train_tokens_per_second": trained / wall, "val_bits_per_char": bits,
              "curve": curve, "final_train_loss": losses[-1]}  # fmt: skip
    return result, optimizer


def generation_speed(model, prompt: np.ndarray, new_tokens: int) -> float:
    """Tokens per second of cached greedy generation."""
    began = time.perf_counter()
    model.generate(prompt, new_tokens, temperature=0, use_cache=True)
    return new_tokens / (time.perf_counter() - began)


def plot(results: dict, path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from tinytorch.core.checkpoint import write_atomic

    figure = Figure(figsize=(6.5, 4))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    for label, result in results.items():
        seconds, bits = zip(*result["curve"])
        axes.plot(seconds, bits, "o-", label=f"{label} ({result['parameters']:,} parameters)")
    axes.set_xlabel("CPU seconds of training")
    axes.set_ylabel("validation bits per character")
    axes.set_title("Same size, same text, same CPU time")
    axes.legend()
    figure.tight_layout()
    return write_atomic(path, lambda handle: figure.savefig(handle, format="png", dpi=110))


def show(summary: dict, console) -> None:
    table = Table(title="GPT-2's parts against Llama's", title_justify="left")
    for i, column in enumerate(("model", "params", "steps", "bits/char", "train tok/s",
                                "gen tok/s", "KV B/token")):  # fmt: skip
        table.add_column(column, justify="left" if i == 0 else "right")
    for label, r in summary["models"].items():
        table.add_row(label, f"{r['parameters']:,}", f"{r['steps']:,}",
                      f"{r['val_bits_per_char']:.3f}", f"{r['train_tokens_per_second']:,.0f}",
                      f"{r['generate_tokens_per_second']:,.0f}",
                      f"{r['kv_bytes_per_token']:,.0f}")  # fmt: skip
    console.print(table)
    for label, r in summary["models"].items():
        console.print(f"[bold]{label}[/bold]: {escape(repr(r['sample']))}", highlight=False)


def run(milestone: Milestone, opts: RunOptions) -> dict:
    """Train both, compare, write summary.json, llama.png and the Llama's checkpoint."""
    console = opts.console
    name, budget, seed = settle(milestone, opts)
    prepare_out(opts.out)
    opts.console.print(code_line(milestone.requires, opts.completed), highlight=False)
    corpus: Corpus = read_corpus(opts.data) if opts.data else default_corpus(opts.data_dir)
    vocab = tokens.build("char", corpus, 0, opts.data_dir)
    ids = vocab.encode(corpus.text)
    gpt_config = replace(PRESETS[name], vocab_size=vocab.vocab_size)
    train_ids, val_ids = split(ids, gpt_config.max_seq_len, seed)
    data = LanguageModelDataset(train_ids, gpt_config.max_seq_len)
    val = LanguageModelDataset(val_ids, gpt_config.max_seq_len)
    to_bits = tokens.bits_per_char(1.0, len(val_ids), len(vocab.decode(val_ids)))
    seed_everything(seed)
    gpt = GPT.from_config(gpt_config)
    llama_cfg = matched_llama(name, vocab.vocab_size, count_parameters(gpt))
    seed_everything(seed)
    llama = Llama.from_config(llama_cfg)
    kept = keep_earlier(opts.out, list(RUN_FILES))
    if kept is not None:
        console.print(f"the earlier run in {opts.out} was moved to {kept}", highlight=False)
    console.print(
        f"corpus: {corpus.source}, {len(corpus.text):,} characters, {vocab.vocab_size} symbols; "
        f"config {name}: embed {gpt_config.embed_dim}, {gpt_config.num_layers} layers, "
        f"{gpt_config.num_heads} heads ({llama_cfg.num_kv_heads} kv heads in the Llama), "
        f"context {gpt_config.max_seq_len}; {budget.cpu_seconds:g} CPU seconds each, seed {seed}",
        highlight=False,
    )
    prompt = vocab.encode(PROMPT if PROMPT in corpus.text else corpus.text[:3])[None, :]
    results, optimizers = {}, {}
    for label, model in (("GPT", gpt), ("Llama", llama)):
        with console.status(f"training the {label} for {budget.cpu_seconds:g} CPU seconds"):
            result, optimizers[label] = train(model, data, val, budget, seed, to_bits)
        model.eval()
        out = model.generate(prompt, budget.sample_tokens, temperature=0.8, seed=seed)
        result |= {
            "parameters": count_parameters(model),
            "generate_tokens_per_second": generation_speed(model, prompt, 48),
            "kv_bytes_per_token": kv_bytes_per_token(model, gpt_config.max_seq_len),
            "sample": vocab.decode(out[0]),
        }
        results[label] = result
    meta = {"architecture": "llama", "config": {"name": name, **asdict(llama_cfg)}, "seed": seed,
            "steps": results["Llama"]["steps"], "corpus_source": corpus.source,
            "corpus_sha256": corpus.sha256, "vocab": vocab.fingerprint,
            "tokenizer": runs.tokenizer_record(vocab.tokenizer)}  # fmt: skip
    history = training.History(val=[(0, b) for _, b in results["Llama"]["curve"]])
    training.save(
        opts.out / runs.CHECKPOINT, llama, optimizers["Llama"], meta["steps"], meta, history
    )
    png = plot(results, opts.out / "llama.png")
    summary = {
        "milestone": milestone.name,
        "config": name,
        "seed": seed,
        "cpu_seconds_each": budget.cpu_seconds,
        "gpt": asdict(gpt_config),
        "llama": asdict(llama_cfg),
        "models": results,
        "files": [png.name, runs.CHECKPOINT, "summary.json"],
    }
    write_json(opts.out / "summary.json", summary)
    show(summary, console)
    return summary
