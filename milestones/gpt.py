"""`tito milestone run gpt`: train a character-level GPT with tinytorch, sample, report, plot."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from milestones import plots, report, scaling, training
from milestones.corpus import Corpus, default_corpus, read_corpus, split
from tinytorch.core.autograd import no_grad, topological_order
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import seed_everything
from tinytorch.data.loader import LanguageModelDataset
from tinytorch.models.transformer import GPT, PRESETS, count_parameters
from tinytorch.text.tokenization import CharTokenizer
from tito.console import console, ok
from tito.errors import TitoError

PROMPT = "The "
TEMPERATURES = (0.5, 0.8, 1.2)


@dataclass(frozen=True)
class Config:
    """A named model and training setup; `steps` is the default when --steps is not given."""

    name: str
    embed_dim: int
    num_layers: int
    num_heads: int
    context: int
    batch_size: int
    steps: int
    lr: float
    warmup: int
    eval_every: int
    eval_windows: int
    checkpoint_every: int
    sample_tokens: int
    build_limit: int  # build (and count) GPT sizes up to this many parameters; formula beyond


CONFIGS = {
    "tiny": Config("tiny", 32, 2, 2, 16, 8, 60, 3e-3, 5, 10, 32, 10, 40, 1_000_000),
    "quick": Config("quick", 64, 2, 4, 64, 16, 300, 3e-3, 20, 100, 256, 100, 120, 1_000_000),
    "default": Config(
        "default", 128, 4, 4, 64, 32, 900, 3e-3, 50, 150, 1024, 150, 240, 130_000_000
    ),
}


@dataclass(frozen=True)
class Options:
    out: Path
    quick: bool = False
    data: Path | None = None
    steps: int | None = None
    seed: int | None = None
    resume: bool = False
    config: str | None = None


def prepare_out(out: Path) -> None:
    """Create the output folder and prove it can be written, before any work is done."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise TitoError(
            f"cannot write to the output folder {out}: {err.strerror or err}",
            hint="pass --out DIR with a folder you can write to",
        ) from None


def settle(opts: Options) -> tuple[Config, int, Path | None, dict | None]:
    """The config, seed and data file of this run; on --resume, those the checkpoint recorded."""
    stored = None
    if opts.resume:
        path = opts.out / training.CHECKPOINT
        if not path.is_file():
            raise TitoError(
                f"--resume: no checkpoint at {path}",
                hint="run once without --resume first (or point --out at that run's folder)",
            )
        stored = training.read_meta(path)
    name = opts.config or (stored["config"]["name"] if stored else None)
    name = name or ("quick" if opts.quick else "default")
    if name not in CONFIGS:
        raise TitoError(f"unknown --config '{name}'", hint=f"choose one of: {', '.join(CONFIGS)}")
    steps = opts.steps if opts.steps is not None else (stored["steps"] if stored else None)
    config = CONFIGS[name] if steps is None else replace(CONFIGS[name], steps=steps)
    if config.steps < 1:
        raise TitoError(f"--steps must be at least 1, got {config.steps}", hint="e.g. --steps 200")
    seed = opts.seed if opts.seed is not None else (stored["seed"] if stored else 0)
    data = opts.data
    if data is None and stored and stored["corpus_source"] != "stdlib docstrings":
        data = Path(stored["corpus_source"])
    return config, seed, data, stored


def check_resume(stored: dict, meta: dict) -> None:
    for key in ("seed", "steps", "corpus_sha256", "vocab", "config"):
        if stored.get(key) != meta[key]:
            raise TitoError(
                f"the checkpoint was made with a different {key.replace('_sha256', '')} "
                "than this run",
                hint="resume with the same --config, --steps, --seed and --data, or start afresh",
            )


def char_tokens(tokenizer, text: str) -> np.ndarray:
    return np.asarray(tokenizer.encode_array(text), dtype=np.int64)


def build_model(config: Config, vocab_size: int) -> GPT:
    # tied output layer, as GPT-2: `tito model export` can then carry the model to transformers
    return GPT(
        vocab_size, config.embed_dim, config.num_layers, config.num_heads, config.context,
        tie_weights=True,
    )  # fmt: skip


def samples(model, tokenizer, prompt: str, new_tokens: int, seed: int) -> list[dict]:
    """Text from the same prompt at each temperature and greedily (temperature 0)."""
    ids = char_tokens(tokenizer, prompt)[None, :]
    out = []
    for temperature in (*TEMPERATURES, 0.0):
        tokens = model.generate(
            ids, max_new_tokens=new_tokens, temperature=temperature, seed=seed, use_cache=True
        )
        text = tokenizer.decode(np.asarray(getattr(tokens, "data", tokens))[0].tolist())
        out.append({"temperature": temperature, "greedy": temperature == 0.0, "text": text})
    return out


def step_bytes(model, optimizer, x: np.ndarray, y: np.ndarray) -> dict[str, int]:
    """Bytes of one training step's arrays: weights, gradients, AdamW moments, graph activations."""
    loss = cross_entropy(model(Tensor(x)), y)
    graph = sum(t.data.nbytes for t in topological_order(loss) if t._ctx is not None)
    loss.backward()
    params = model.parameters()
    measured = {
        "weights": sum(p.data.nbytes for p in params),
        "gradients": sum(p.grad.nbytes for p in params if p.grad is not None),
        "adam_state": sum(
            v.nbytes for state in optimizer.state for v in state.values() if hasattr(v, "nbytes")
        ),
        "activations": int(graph),
    }
    optimizer.zero_grad()
    return measured


def attention_maps(model, ids: np.ndarray) -> list[np.ndarray]:
    """Each block's attention weights (1, heads, T, T) for one sequence of token ids."""
    model.eval()
    with no_grad():
        model(Tensor(ids[None, :]))
    return [np.array(block.attention.last_attention) for block in model.blocks]


def scaling_reports(model, optimizer, config: Config, quick: bool, x, y) -> dict:
    """Every report of step 4, as plain numbers for the JSON summary."""
    this = model.config
    params = count_parameters(model)
    contexts = (16, 32, 64, 128) if quick else (16, 32, 64, 128, 256, 512)
    measured = step_bytes(model, optimizer, x, y)
    prompt = np.zeros((1, 4), dtype=np.int64)
    model.eval()
    kv = {"this model": scaling.kv_cache_bytes_per_token(this)}
    kv.update({n: scaling.kv_cache_bytes_per_token(PRESETS[n]) for n in scaling.GPT_SIZES})
    return {
        "parameters": {"total": params, "by_component": scaling.by_component(model)},
        "parameter_scaling": scaling.parameter_scaling(this, config.build_limit),
        "attention_memory": scaling.attention_memory(config.num_heads, contexts),
        "kv_cache_bytes_per_token": {
            "predicted": kv,
            "measured_this_model": scaling.measured_kv_bytes_per_token(model),
        },
        "training_memory": scaling.training_memory(this, config.batch_size, measured),
        "generation_speed": scaling.generation_speed(model, prompt, config.context - 4),
    }


def write_json(path: Path, payload: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def run(opts: Options) -> dict:
    """The whole milestone; returns the summary it writes to <out>/summary.json."""
    config, seed, data, stored = settle(opts)
    prepare_out(opts.out)
    corpus: Corpus = read_corpus(data) if data is not None else default_corpus()
    tokenizer = CharTokenizer.from_text(corpus.text)
    tokens = char_tokens(tokenizer, corpus.text)
    train_tokens, val_tokens = split(tokens, config.context, seed)
    train_data = LanguageModelDataset(train_tokens, config.context)
    val_data = LanguageModelDataset(val_tokens, config.context)
    vocab = "".join(tokenizer.vocab)
    meta = {
        "config": asdict(config),
        "seed": seed,
        "steps": config.steps,
        "corpus_source": corpus.source,
        "corpus_sha256": corpus.sha256,
        "vocab": vocab,
    }
    if stored is not None:
        check_resume(stored, meta)
    console.print(
        f"corpus: {corpus.source}, {len(corpus.text):,} characters, vocabulary {len(vocab)}; "
        f"config {config.name}: embed {config.embed_dim}, {config.num_layers} layers, "
        f"{config.num_heads} heads, context {config.context}, batch {config.batch_size}, "
        f"{config.steps} steps, seed {seed}"
    )
    seed_everything(seed)
    model = build_model(config, len(vocab))
    checkpoint = opts.out / training.CHECKPOINT
    if not opts.resume and checkpoint.exists():
        kept = checkpoint.with_name("checkpoint.previous.npz")
        os.replace(checkpoint, kept)
        console.print(f"[note]the earlier checkpoint was kept as {kept}[/note]")
    settings = training.Settings(
        steps=config.steps,
        batch_size=config.batch_size,
        context=config.context,
        lr=config.lr,
        warmup=min(config.warmup, config.steps // 5),
        min_lr=config.lr / 10,
        weight_decay=0.01,
        clip=1.0,
        eval_every=config.eval_every,
        eval_windows=config.eval_windows,
        checkpoint_every=config.checkpoint_every,
        seed=seed,
    )
    history, seconds, optimizer = training.train(
        model, train_data, val_data, settings, opts.out, meta, opts.resume
    )
    prompt = PROMPT if all(ch in vocab for ch in PROMPT) else corpus.text[:4]
    began = time.perf_counter()
    texts = samples(model, tokenizer, prompt, config.sample_tokens, seed)
    x, y = training.batch_at(train_data, seed, 0, config.batch_size)
    reports = scaling_reports(model, optimizer, config, opts.quick, x, y)
    shown = texts[-1]["text"][:16]  # the greedy sample's start
    files = [
        plots.loss_curves(history.train, history.val, opts.out / "loss.png"),
        plots.attention_heatmaps(
            attention_maps(model, char_tokens(tokenizer, shown)),
            list(shown),
            opts.out / "attention.png",
        ),
        plots.scaling_curves(
            reports["parameter_scaling"], reports["attention_memory"], opts.out / "scaling.png"
        ),
    ]
    trained_tokens = (config.steps - history.resumed_at) * config.batch_size * config.context
    summary = {
        "milestone": "gpt",
        "config": asdict(config),
        "seed": seed,
        "corpus": {
            "source": corpus.source,
            "characters": len(corpus.text),
            "sha256": corpus.sha256,
            "vocab_size": len(vocab),
            "train_tokens": int(len(train_tokens)),
            "val_tokens": int(len(val_tokens)),
        },
        "training": {
            "steps": config.steps,
            "resumed_at_step": history.resumed_at,
            "initial_val_loss": history.val[0][1],
            "final_val_loss": history.val[-1][1],
            "final_train_loss": history.train[-1],
            "val_history": history.val,
            "seconds": seconds,
            "tokens_per_second": trained_tokens / seconds if seconds > 0 else None,
        },
        "prompt": prompt,
        "samples": texts,
        **reports,
        "report_seconds": time.perf_counter() - began,
        "files": [p.name for p in files] + [training.CHECKPOINT, "summary.json"],
    }
    write_json(opts.out / "summary.json", summary)
    report.show_gpt(summary)
    ok(f"wrote {', '.join(summary['files'])} to {opts.out}")
    return summary


def run_scaling(out: Path, quick: bool, config_name: str | None) -> dict:
    """`tito milestone run scaling`: the reports of `run gpt` for an untrained model."""
    name = config_name or ("quick" if quick else "default")
    if name not in CONFIGS:
        raise TitoError(f"unknown --config '{name}'", hint=f"choose one of: {', '.join(CONFIGS)}")
    config = CONFIGS[name]
    prepare_out(out)
    vocab_size = default_corpus_vocab()
    seed_everything(0)
    model = build_model(config, vocab_size)
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, vocab_size, size=(config.batch_size, config.context)) for _ in "xy")
    optimizer = AdamW(model.parameters(), lr=config.lr)
    cross_entropy(model(Tensor(x)), y).backward()
    optimizer.step()  # one step, so AdamW's moments exist and can be measured
    optimizer.zero_grad()
    summary = {"milestone": "scaling", "config": asdict(config), "vocab_size": vocab_size}
    summary.update(scaling_reports(model, optimizer, config, quick, x, y))
    png = plots.scaling_curves(
        summary["parameter_scaling"], summary["attention_memory"], out / "scaling.png"
    )
    summary["files"] = [png.name, "summary.json"]
    write_json(out / "summary.json", summary)
    report.show_scaling(summary)
    ok(f"wrote {png.name} and summary.json to {out}")
    return summary


def default_corpus_vocab() -> int:
    return len(set(default_corpus().text))
