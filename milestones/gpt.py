"""`tito milestone run gpt`: train a GPT with tinytorch (BPE or characters), sample, report."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from milestones import plots, provenance, report, runs, scaling, tokens, training
from milestones.corpus import DEFAULT_SOURCE, Corpus, default_corpus, read_corpus, split
from milestones.errors import MilestoneError
from milestones.folder import removed_if_left_empty
from milestones.history import code_line
from milestones.output import EARLIER, keep_earlier, prepare_out, write_json
from milestones.registry import Milestone, RunOptions
from tinytorch.accel.accelerate import accelerate
from tinytorch.accel.processes import can_fork
from tinytorch.core.autograd import no_grad, topological_order
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import seed_everything
from tinytorch.data.loader import LanguageModelDataset
from tinytorch.models.scaling import count_parameters
from tinytorch.models.transformer import GPT, PRESETS, GPTConfig

PROMPT = "The"  # no trailing space: a BPE vocabulary writes the space with the next word
# (temperature, top_k, top_p, repetition_penalty) of each sample (steer_logits, given):
# temperature 0 is greedy; top-p keeps the likeliest tokens holding that probability; the penalty
# lowers every token already in the context, which keeps a small model from writing one phrase
# again and again (milestones/RESULTS.md, "Sampling"). The plain model's own distribution last.
SAMPLING = ((0.5, None, 0.9, 1.3), (0.0, None, None, 1.3), (1.0, None, None, 1.0))
RUN_FILES = ("summary.json", training.CHECKPOINT, "loss.png", "attention.png", "scaling.png")
# A new run over a finished one trains in <out>/next/ and takes the finished run's place only when
# it finishes (the finished run then moves to <out>/earlier/<time>/): stopped, it leaves the
# finished run where compress, the olympics and `tito model export` look.
NEXT = "next"


@dataclass(frozen=True)
class Training:
    """How a model size is trained and sampled; the sizes themselves are PRESETS[name]."""

    batch_size: int
    steps: int  # the default when --steps is not given
    lr: float
    warmup: int
    eval_every: int
    eval_windows: int
    checkpoint_every: int
    sample_tokens: int
    build_limit: int  # build (and count) GPT sizes up to this many parameters; formula beyond
    tokenizer: str = "char"  # "char" or "bpe"; --tokenizer overrides it
    bpe_vocab: int = 1024  # vocabulary of the BPE tokenizer: 256 bytes plus learned merges


TRAINING = {
    "nano": Training(8, 60, 3e-3, 5, 10, 32, 10, 40, 1_000_000),
    "tiny": Training(16, 600, 3e-3, 20, 150, 256, 150, 120, 1_000_000, "bpe"),  # --quick
    "small": Training(32, 900, 3e-3, 50, 150, 1024, 150, 240, 130_000_000, "bpe"),
}


def config_name(milestone: Milestone, opts: RunOptions, stored: dict | None) -> str:
    """--config, else the checkpoint's, else tiny for --quick, else the milestone's preset."""
    stored_name = stored["config"]["name"] if stored else None
    return opts.size(TRAINING, "tiny", milestone.preset, stored_name)


def _finished(folder: Path) -> bool:
    try:
        return runs.finished(folder)
    except MilestoneError:  # a damaged checkpoint is no finished run: it is kept in earlier/
        return False


def work_folder(out: Path, resume: bool) -> Path:
    """Where this run trains: on --resume the run in <out>/next, else the one in <out>; a new run
    trains in <out>/next when <out> holds a finished run, else in <out>."""
    if not resume:
        return out / NEXT if _finished(out) else out
    for folder in (out / NEXT, out):
        if (folder / training.CHECKPOINT).is_file():
            return folder
    kept = [
        *(out / EARLIER).glob(f"*/{training.CHECKPOINT}"),
        *(out / "previous").glob(training.CHECKPOINT),  # where tito kept one before earlier/
    ]
    kept.sort(key=lambda p: p.stat().st_mtime)
    hint = "run once without --resume first (or point --out at that run's folder)"
    if kept:
        hint = (
            f"the latest earlier run is kept in {kept[-1].parent}: continue it with "
            f"--out {kept[-1].parent} --resume, or run without --resume"
        )
    raise MilestoneError(
        f"--resume: no run to continue in {out} (no {training.CHECKPOINT} there or in "
        f"{out / NEXT})",
        hint=hint,
    )


def settle(milestone: Milestone, opts: RunOptions):
    """Config name, training, seed, data file of this run; on --resume, what the checkpoint says."""
    stored = None
    if opts.resume:
        stored = training.read_meta(work_folder(opts.out, True) / training.CHECKPOINT)
    name = config_name(milestone, opts, stored)
    steps = opts.steps if opts.steps is not None else (stored["steps"] if stored else None)
    setup = TRAINING[name] if steps is None else replace(TRAINING[name], steps=steps)
    kind = opts.tokenizer or (stored["config"].get("tokenizer") if stored else None)
    setup = setup if kind is None else replace(setup, tokenizer=kind)
    if setup.tokenizer not in tokens.KINDS:
        hint = f"choose one of: {', '.join(tokens.KINDS)}"
        raise MilestoneError(f"unknown --tokenizer '{setup.tokenizer}'", hint=hint)
    seed = opts.seed if opts.seed is not None else (stored["seed"] if stored else 0)
    data = opts.data
    if data is None and stored and stored["corpus_source"] != DEFAULT_SOURCE:
        data = Path(stored["corpus_source"])
    return name, setup, seed, data, stored


def check_resume(stored: dict, meta: dict) -> None:
    for key in ("seed", "steps", "corpus_sha256", "vocab", "config"):
        if stored.get(key) != meta[key]:
            raise MilestoneError(
                f"the checkpoint was made with a different {key.replace('_sha256', '')} "
                "than this run",
                hint="resume with the same --config, --steps, --seed and --data, or start afresh",
            )


def samples(model, vocab: tokens.Tokens, prompt: str, new_tokens: int, seed: int) -> list[dict]:
    """Text from the same prompt with each SAMPLING setting (temperature 0 is greedy)."""
    ids = vocab.encode(prompt)[None, :]
    out = []
    for temperature, top_k, top_p, penalty in SAMPLING:
        # a character model repeats letters by nature: penalising them would spell nonsense
        penalty = penalty if vocab.kind == "bpe" else 1.0
        ids_out = model.generate(
            ids, new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
            repetition_penalty=penalty, seed=seed, use_cache=True,
        )  # fmt: skip
        out.append(
            {
                "temperature": temperature,
                "top_k": top_k,
                "top_p": top_p,
                "repetition_penalty": penalty,
                "greedy": temperature == 0.0,
                "text": vocab.decode(ids_out[0]),
            }
        )
    return out


def step_bytes(model, optimizer, x: np.ndarray, y: np.ndarray) -> dict[str, int]:
    """Bytes of one training step's arrays: weights, gradients, AdamW moments, graph activations."""
    # by hand, not module 07's train_step: the graph is measured between the forward and backward;
    # through the class's forward, the batch whole: a split batch's slices keep their graphs
    # inside one node (tinytorch/accel/parallel.py), where the walk below would not see them
    loss = cross_entropy(type(model).forward(model, Tensor(x)), y)
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


def scaling_reports(model, optimizer, setup: Training, quick: bool, x, y) -> dict:
    """Every scaling report, as plain numbers for the JSON summary."""
    this = model.config
    params = count_parameters(model)
    seq_lens = (16, 32, 64, 128) if quick else (16, 32, 64, 128, 256, 512)
    measured = step_bytes(model, optimizer, x, y)
    prompt = np.zeros((1, 4), dtype=np.int64)
    model.eval()
    kv = {"this model": scaling.kv_cache_bytes_per_token(this)}
    kv.update({n: scaling.kv_cache_bytes_per_token(PRESETS[n]) for n in scaling.GPT_SIZES})
    return {
        "parameters": {"total": params, "by_component": scaling.by_component(model)},
        "parameter_scaling": scaling.parameter_scaling(this, setup.build_limit),
        "attention_memory": scaling.attention_memory(this.num_heads, seq_lens),
        "kv_cache_bytes_per_token": {
            "predicted": kv,
            "measured_this_model": scaling.measured_kv_bytes_per_token(model),
        },
        "training_memory": scaling.training_memory(this, setup.batch_size, measured),
        "generation_speed": scaling.generation_speed(model, prompt, this.max_seq_len - 4),
    }


def config_summary(name: str, model: GPTConfig, setup: Training) -> dict:
    """The run's configuration in one flat dictionary: preset name, model sizes, training."""
    return {"name": name, **asdict(model), **asdict(setup)}


def run(milestone: Milestone, opts: RunOptions) -> dict:
    """The whole milestone; returns the summary it writes to <out>/summary.json."""
    name, setup, seed, data, stored = settle(milestone, opts)
    work = work_folder(opts.out, opts.resume)
    with removed_if_left_empty(work):
        summary = train_and_report(milestone, opts, work, name, setup, seed, data, stored)
    if work != opts.out:  # trained beside a finished run: it takes that run's place now
        kept = keep_earlier(opts.out, list(RUN_FILES))
        for file in RUN_FILES:
            if (work / file).is_file():
                (work / file).replace(opts.out / file)
        if not any(work.iterdir()):
            work.rmdir()
        if kept is not None:
            opts.console.print(
                f"the earlier run in {opts.out} was moved to {kept}", highlight=False
            )
    report.show_gpt(summary, opts.console)
    return summary


def train_and_report(milestone, opts, work, name, setup, seed, data, stored) -> dict:
    """Train (or resume) the run in `work`, sample, measure, plot; write its summary there."""
    console = opts.console
    prepare_out(work)
    corpus: Corpus = read_corpus(data) if data is not None else default_corpus(opts.data_dir)
    began = time.perf_counter()
    vocab = tokens.build(setup.tokenizer, corpus, setup.bpe_vocab, opts.data_dir)
    ids = vocab.encode(corpus.text)
    tokenizer_seconds = time.perf_counter() - began
    config = replace(PRESETS[name], vocab_size=vocab.vocab_size)
    fits = [n for n in TRAINING if 2 * (PRESETS[n].max_seq_len + 2) <= len(ids)]  # see split
    smaller = max(fits, key=lambda n: PRESETS[n].max_seq_len) if fits else None
    train_ids, val_ids = split(ids, config.max_seq_len, seed, smaller)
    train_data = LanguageModelDataset(train_ids, config.max_seq_len)
    val_data = LanguageModelDataset(val_ids, config.max_seq_len)
    val_chars = len(vocab.decode(val_ids))
    to_bits_per_char = tokens.bits_per_char(1.0, len(val_ids), val_chars)
    meta = {
        "config": config_summary(name, config, setup),
        "seed": seed,
        "steps": setup.steps,
        "corpus_source": corpus.source,
        "corpus_sha256": corpus.sha256,
        "vocab": vocab.fingerprint,
        "tokenizer": runs.tokenizer_record(vocab.tokenizer),  # load_run rebuilds it from this
    }
    if stored is not None:
        check_resume(stored, meta)
    workers = training.default_workers()
    fast = provenance.parts(opts.completed)
    console.print(
        f"corpus: {corpus.source}, {len(corpus.text):,} characters; tokenizer {vocab.kind}: "
        f"{vocab.vocab_size} tokens, {len(corpus.text) / len(ids):.2f} characters per token; "
        f"config {name}: embed {config.embed_dim}, {config.num_layers} layers, "
        f"{config.num_heads} heads, max_seq_len {config.max_seq_len}, batch {setup.batch_size}, "
        f"{setup.steps} steps, seed {seed}; {workers} data-parallel worker(s) "
        f"({'processes' if can_fork() else 'threads'})"
    )
    console.print(provenance.header(opts.completed, fast))
    seed_everything(seed)
    model = accelerate(GPT.from_config(config), fast)
    if opts.resume:
        console.print(f"continuing the run in {work}", highlight=False)
    else:  # an unfinished run where this one trains is kept whole, never trained over
        for folder in dict.fromkeys((opts.out / NEXT, work)):
            kept = keep_earlier(folder, list(RUN_FILES), opts.out)
            if kept is not None:
                console.print(
                    f"the unfinished run in {folder} was moved to {kept}", highlight=False
                )
    if work != opts.out:
        console.print(
            f"{opts.out} holds a finished run: this one trains in {work} and takes its place "
            f"when it finishes (the finished run then moves to {opts.out / EARLIER})",
            highlight=False,
        )
    settings = training.Settings(
        steps=setup.steps,
        batch_size=setup.batch_size,
        max_seq_len=config.max_seq_len,
        lr=setup.lr,
        warmup=min(setup.warmup, setup.steps // 5),
        min_lr=setup.lr / 10,
        weight_decay=0.01,
        clip=1.0,
        eval_every=setup.eval_every,
        eval_windows=setup.eval_windows,
        checkpoint_every=setup.checkpoint_every,
        seed=seed,
        to_bits_per_char=to_bits_per_char,
        workers=workers,
        accelerate=fast,
    )
    history, seconds, optimizer = training.train(
        model, train_data, val_data, settings, work, meta, opts.resume, console
    )
    prompt = PROMPT if PROMPT in corpus.text else corpus.text[:4]
    began = time.perf_counter()
    texts = samples(model, vocab, prompt, setup.sample_tokens, seed)
    x, y = training.batch_at(train_data, seed, 0, setup.batch_size)
    reports = scaling_reports(model, optimizer, setup, opts.quick, x, y)
    greedy = next((t for t in texts if t["greedy"]), texts[0])
    shown = vocab.encode(greedy["text"])[:16]  # the greedy sample's first tokens
    files = [
        plots.loss_curves(history.train, history.val, work / "loss.png"),
        plots.attention_heatmaps(
            attention_maps(model, shown), vocab.pieces(shown), work / "attention.png"
        ),
        plots.scaling_curves(
            reports["parameter_scaling"], reports["attention_memory"], work / "scaling.png"
        ),
    ]
    trained_tokens = (setup.steps - history.resumed_at) * setup.batch_size * config.max_seq_len
    summary = {
        "milestone": milestone.name,
        "config": config_summary(name, config, setup),
        "seed": seed,
        "corpus": {
            "source": corpus.source,
            "characters": len(corpus.text),
            "sha256": corpus.sha256,
            "tokenizer": vocab.kind,
            "vocab_size": vocab.vocab_size,
            "characters_per_token": len(corpus.text) / len(ids),
            "train_tokens": int(len(train_ids)),
            "val_tokens": int(len(val_ids)),
            "val_characters": val_chars,
        },
        "training": {
            "steps": setup.steps,
            "resumed_at_step": history.resumed_at,
            "initial_val_loss": history.val[0][1],
            "final_val_loss": history.val[-1][1],
            "final_val_bits_per_char": history.val[-1][1] * to_bits_per_char,
            "final_train_loss": history.train[-1],
            "val_history": history.val,
            "tokenizer_seconds": tokenizer_seconds,
            "seconds": seconds,
            "tokens_per_second": trained_tokens / seconds if seconds > 0 else None,
            "data_parallel_workers": settings.workers,
            "accelerated": sorted(fast),
        },
        "prompt": prompt,
        "samples": texts,
        **reports,
        "report_seconds": time.perf_counter() - began,
        "files": [p.name for p in files] + [training.CHECKPOINT, "summary.json"],
    }
    write_json(work / "summary.json", summary)
    return summary


def run_scaling(milestone: Milestone, opts: RunOptions) -> dict:
    """`tito milestone run scaling`: the reports of `run gpt` for an untrained model."""
    name = config_name(milestone, opts, None)
    setup = TRAINING[name]
    prepare_out(opts.out)
    opts.console.print(code_line(milestone.requires, opts.completed), highlight=False)
    vocab_size = len(set(default_corpus(opts.data_dir).text))
    config = replace(PRESETS[name], vocab_size=vocab_size)
    seed_everything(0)
    model = GPT.from_config(config)
    rng = np.random.default_rng(0)
    shape = (setup.batch_size, config.max_seq_len)
    x, y = (rng.integers(0, vocab_size, size=shape) for _ in "xy")
    optimizer = AdamW(model.parameters(), lr=setup.lr)
    cross_entropy(model(Tensor(x)), y).backward()
    optimizer.step()  # one step, so AdamW's moments exist and can be measured
    optimizer.zero_grad()
    summary = {
        "milestone": milestone.name,
        "config": config_summary(name, config, setup),
        "vocab_size": vocab_size,
    }
    summary.update(scaling_reports(model, optimizer, setup, opts.quick, x, y))
    png = plots.scaling_curves(
        summary["parameter_scaling"], summary["attention_memory"], opts.out / "scaling.png"
    )
    summary["files"] = [png.name, "summary.json"]
    write_json(opts.out / "summary.json", summary)
    report.show_scaling(summary, opts.console)
    return summary
