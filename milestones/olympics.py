"""The Torch Olympics (module 20), measured by the tool: an entry is a trained run plus a manifest.

The manifest (`olympics.json` in the run folder) names the entrant and the transformations to
apply; anything else in it, such as a claimed speed, is ignored. The tool loads the run, applies
the transformations with the package's own code, and measures three things itself:

- tokens per second of cached generation, timed by module 19's harness in a process of its own;
- the bytes of every array the model holds (int8 weights count one byte each);
- bits per character on held-out text: documentation of standard-library modules that the default
  training corpus (milestones/corpus.py) leaves out, minus any paragraph found in the run's corpus;
  and on the same text with its sentences shuffled, the memorisation test that finds an entry
  trained on the held-out text (milestones/memorisation.py), which then scores 0.

The baseline is the same run measured with no transformation. Module 20's rules
(`tinytorch.olympics.rules`) decide whether the entry qualifies and what it scores.
"""

from __future__ import annotations

import hashlib
import json
import math
import sysconfig
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from milestones.corpus import docstrings, normalise
from milestones.errors import MilestoneError
from milestones.memorisation import memorised, shuffled_sentences
from milestones.runs import Run, load_run

# Standard-library modules whose documentation the default corpus does not use (checked in a test).
HELDOUT_SOURCES = (
    "fractions", "pathlib", "csv", "heapq", "bisect", "string", "pprint", "glob", "fnmatch",
    "tempfile", "queue", "sched", "contextlib", "dataclasses", "enum", "gettext", "locale",
    "mimetypes", "operator", "platform", "shlex", "tokenize", "typing", "uuid", "weakref",
    "zipfile", "ftplib", "imaplib", "mailbox", "datetime", "http/client", "urllib/parse",
)  # fmt: skip
HELDOUT_CHARS = 40_000  # enough for a stable bits/char, small enough to score in seconds
MANIFEST = "olympics.json"
PROMPT = "The "
GENERATED_TOKENS = 48


def heldout_text(training_text: str = "", limit: int = HELDOUT_CHARS) -> str:
    """Held-out prose: the docstrings of HELDOUT_SOURCES, without paragraphs of `training_text`."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    paragraphs = []
    for name in HELDOUT_SOURCES:
        for path in (stdlib / f"{name}.py", stdlib / name / "__init__.py"):
            if path.is_file():
                paragraphs += normalise("\n\n".join(docstrings(path))).split("\n\n")
                break
    kept = [p for p in paragraphs if p.strip() and p.strip() not in training_text]
    text = "\n\n".join(kept)[:limit]
    if len(text) < 5_000:
        raise MilestoneError(
            "this Python's standard library holds too little documentation for held-out text",
            hint="use a full Python install (its standard library's .py files)",
        )
    return text


HELDOUT_FILE_BYTES = 4 * 2**20  # an instructor's held-out file is read up to this size


def read_heldout(path: Path, limit: int = HELDOUT_CHARS) -> str:
    """An instructor's own held-out text (`tito olympics grade --heldout FILE`): text no student
    has, so no entry can have trained on it. Normalised like the corpus, at most `limit` chars."""
    path = Path(path)
    if not path.is_file():
        raise MilestoneError(f"no held-out file at {path}", hint="give a plain-text file")
    with open(path, "rb") as handle:
        data = handle.read(HELDOUT_FILE_BYTES)
    try:
        text = normalise(data.decode("utf-8"))[:limit]
    except UnicodeDecodeError as err:
        raise MilestoneError(f"{path} is not UTF-8 text (byte {err.start})") from None
    if len(text) < 5_000:
        raise MilestoneError(
            f"{path} holds {len(text)} characters of text; held-out text needs at least 5,000",
            hint="use prose the students have not seen, e.g. your own lecture notes",
        )
    return text


def read_manifest(folder: Path) -> dict:
    """The entrant's name and transformations; every other field is ignored."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return {"name": Path(folder).name, "transforms": []}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise MilestoneError(
            f"{path} is not valid JSON ({err})",
            hint='write e.g. {"name": "ada", "transforms": ["accelerate"]}',
        ) from None
    if not isinstance(manifest, dict):
        raise MilestoneError(f"{path} must hold one JSON object", hint='e.g. {"name": "ada"}')
    name = manifest.get("name", Path(folder).name)
    transforms = manifest.get("transforms", [])
    if not isinstance(name, str) or not isinstance(transforms, list):
        raise MilestoneError(
            f"{path}: 'name' must be text and 'transforms' a list of names",
            hint='e.g. "transforms": ["accelerate", "quantize:int8-per-channel"]',
        )
    for t in transforms:
        transform(t)  # an unknown one fails here, before anything is measured
    kept = {"name": name, "transforms": [str(t) for t in transforms]}
    return {**kept, "train": manifest["train"]} if "train" in manifest else kept


def _accelerate(model, _):
    from tinytorch.accel.accelerate import accelerate

    return accelerate(model)


def _quantize(model, scheme):
    from tinytorch.compress.quantization import quantize_model

    bits, per_channel = QUANTIZE[scheme]
    return quantize_model(model, bits=bits, per_channel=per_channel)


def _prune_structure(model, fraction):
    from tinytorch.compress.pruning import prune_structure

    prune_structure(model, fraction, fraction)  # heads and MLP neurons, removed in place
    return model


def _low_rank(model, ratio):
    from tinytorch.compress.lowrank import factorize

    return factorize(model, ratio)


QUANTIZE = {"int8-per-channel": (8, True), "int8-per-tensor": (8, False),
            "int4-per-channel": (4, True), "int4-per-tensor": (4, False)}  # fmt: skip


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise ValueError("a fraction between 0 and 1, e.g. 0.5")
    return value


def _scheme(text: str) -> str:
    if text not in QUANTIZE:
        raise ValueError("one of " + ", ".join(QUANTIZE))
    return text


# name -> (the module whose package code does it, how its argument is read, the call)
TRANSFORMS = {
    "accelerate": (18, str, _accelerate),
    "quantize": (15, _scheme, _quantize),
    "prune-structure": (16, _fraction, _prune_structure),
    "lowrank": (16, _fraction, _low_rank),
}


def transform(spec: str):
    """(module number, call) of a spec such as "quantize:int8-per-channel", or a MilestoneError."""
    name, _, argument = str(spec).partition(":")
    if name not in TRANSFORMS:
        raise MilestoneError(
            f"no transformation '{spec}'",
            hint="the transformations: accelerate, quantize:SCHEME, prune-structure:FRACTION, "
            "lowrank:FRACTION",
        )
    number, read, call = TRANSFORMS[name]
    try:
        value = read(argument)
    except ValueError as err:
        raise MilestoneError(f"'{spec}': the argument after ':' must be {err}") from None
    return number, lambda model: call(model, value)


def apply(model, transforms: list[str]):
    for spec in transforms:
        number, call = transform(spec)
        try:
            model = call(model) or model
        except ImportError:
            raise MilestoneError(
                f"'{spec}' needs module {number:02d}, which this package does not have",
                hint=f"complete module {number} first (tito module complete {number})",
            ) from None
    return model


def weight_bytes(model) -> int:
    """Bytes of every distinct array the model holds (parameters, buffers, int8 weights).

    Call it before the model runs: a layer may keep arrays of its last call (module 12's
    attention keeps its weights, `last_attention`), which are no part of the model's size."""
    from tinytorch.core.tensor import Tensor

    seen, total, todo, visited = set(), 0, [model], set()
    while todo:
        obj = todo.pop()
        if isinstance(obj, Tensor):
            obj = obj.data
        if isinstance(obj, np.ndarray):
            base = obj if obj.base is None else obj.base
            if id(base) not in seen and isinstance(base, np.ndarray):
                seen.add(id(base))
                total += base.nbytes
            continue
        if id(obj) in visited:
            continue
        visited.add(id(obj))
        if isinstance(obj, dict):
            todo += list(obj.values())
        elif isinstance(obj, (list, tuple)):
            todo += list(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            todo += list(vars(obj).values())
    return total


def heldout_bits(run: Run, model, text: str) -> float:
    """Bits per character of `text` by `model`: module 20's `heldout_bits_per_char` (module 04's
    cross-entropy over non-overlapping windows of the run's context length), on the run's tokens."""
    from tinytorch.olympics.rules import heldout_bits_per_char

    if run.vocab.kind == "char":  # a character vocabulary knows only its corpus's characters
        known = set(run.vocab.tokenizer.vocab)
        text = "".join(ch for ch in text if ch in known)
    ids = np.asarray(run.vocab.encode(text))
    window = run.config.max_seq_len
    count = (len(ids) - 1) // window
    if count < 1:
        raise MilestoneError(
            f"the held-out text is {len(ids)} tokens, too short for one window of {window} + 1",
            hint="score on a longer text",
        )
    chars = len(run.vocab.decode(ids[1 : count * window + 1]))
    return heldout_bits_per_char(model, ids, chars, window)


def new_tokens(run: Run) -> int:
    """How many tokens a timed generation writes: GENERATED_TOKENS, or what the context holds."""
    return min(GENERATED_TOKENS, run.config.max_seq_len - len(run.vocab.encode(PROMPT)))


def generation_call(run: str, transforms: list[str], data_dir: str | None = None,
                    untrusted: bool = False):  # fmt: skip
    """A call that writes new_tokens() tokens with the KV cache: module 19 times it."""
    loaded = load_run(Path(run), Path(data_dir) if data_dir else None, untrusted)
    model = apply(loaded.model, transforms)
    prompt = np.array([loaded.vocab.encode(PROMPT)])
    new = new_tokens(loaded)
    return lambda: model.generate(prompt, new, temperature=0, use_cache=True)


def tokens_per_second(run: Run, transforms: list[str], data_dir: Path | None, repeats: int,
                      untrusted: bool = False) -> float:  # fmt: skip
    from tinytorch.bench.processes import run_isolated

    kwargs = {"run": str(run.folder), "transforms": transforms, "untrusted": untrusted,
              "data_dir": str(data_dir) if data_dir else None}  # fmt: skip
    result = run_isolated("milestones.olympics:generation_call", kwargs, warmup=1, repeats=repeats)
    return new_tokens(run) / float(np.median(result["seconds"]))


def shuffle_order() -> np.random.Generator:
    """The generator of the memorisation test's sentence order: the system's entropy, drawn at
    each measurement, so no entry can have seen the order."""
    return np.random.default_rng()


def measure(folder: Path, transforms: list[str], data_dir: Path | None, repeats: int = 5,
            untrusted: bool = False, heldout: str | None = None):  # fmt: skip
    """What the tool measures of a run with `transforms` applied: a module 20 `Measured`.
    `heldout` replaces the default held-out text (an instructor's own, read_heldout)."""
    from tinytorch.olympics.events import Measured

    run = load_run(folder, data_dir, untrusted)
    model = apply(run.model, transforms)
    size = weight_bytes(model)  # before any forward: a layer keeps its last call's arrays
    # one short cached generation here first: a failure in the student's code then surfaces in
    # this process, where tito can name the module and cell (the timed ones run in another)
    model.generate(np.array([run.vocab.encode(PROMPT)]), 2, temperature=0, use_cache=True)
    text = heldout if heldout is not None else heldout_text(run.corpus.text)
    bits = heldout_bits(run, model, text)  # in this process too
    # the memorisation test (milestones/memorisation.py): its sentences in an order drawn now
    shuffled = heldout_bits(run, model, shuffled_sentences(text, shuffle_order()))
    return Measured(
        tokens_per_second=tokens_per_second(run, transforms, data_dir, repeats, untrusted),
        bytes=size,
        bits_per_char=bits,
        shuffled_bits_per_char=shuffled,
    )


def checkpoint_digest(folder: Path) -> str:
    from milestones.training import CHECKPOINT

    return hashlib.sha256((Path(folder) / CHECKPOINT).read_bytes()).hexdigest()


QUALITY_FOLDER = "olympics-quality"  # inside the entry's folder: the two models trained


def run_event(event_name: str, folder: Path, data_dir: Path | None, repeats: int = 5,
              budget: float = 60.0, baseline=None, untrusted: bool = False,
              heldout: str | None = None) -> dict:  # fmt: skip
    """Measure the baseline and the entry, judge the entry by module 20's rules: one record.

    Speed, size and all-around measure the trained run in `folder` with and without the
    manifest's transformations. Quality trains two models under the same CPU-second `budget`,
    the default settings (the baseline) and the manifest's "train" choices, and measures both.
    A `baseline` given (a `Measured`, the same for a whole class) replaces the measured one;
    `untrusted` bounds what a submitted run may ask for (milestones.runs.check_untrusted);
    `heldout`, an instructor's own text, replaces the default held-out text."""
    from dataclasses import replace

    from milestones import budget as clock
    from tinytorch.bench.processes import environment
    from tinytorch.olympics.events import event
    from tinytorch.olympics.rules import score, violation

    rules = event(event_name)
    manifest = read_manifest(folder)
    measured = Path(folder)
    if rules.trained_within_budget:
        job = clock.settings(manifest)
        work = Path(folder) / QUALITY_FOLDER
        if baseline is None:
            base_cpu = clock.train(clock.settings({}), [], work / "baseline", budget, data_dir)
            baseline = replace(measure(work / "baseline", [], data_dir, repeats,
                                       heldout=heldout),
                               train_cpu_seconds=base_cpu)  # fmt: skip
        entry_cpu = clock.train(job, manifest["transforms"], work / "entry", budget, data_dir)
        measured = work / "entry"
        entry = replace(measure(measured, manifest["transforms"], data_dir, repeats,
                                heldout=heldout),
                        train_cpu_seconds=entry_cpu)  # fmt: skip
    else:
        if baseline is None:
            baseline = measure(folder, [], data_dir, repeats, untrusted, heldout)
        entry = measure(folder, manifest["transforms"], data_dir, repeats, untrusted, heldout)
    # an entry that learned the held-out text is not ranked on it, whatever else it kept
    broke = memorised(entry.bits_per_char, entry.shuffled_bits_per_char)
    broke = broke or violation(rules, entry, baseline, budget)
    return {
        "event": rules.name,
        "name": manifest["name"],
        "run": str(measured.resolve()),
        "checkpoint_sha256": checkpoint_digest(measured),
        "transforms": manifest["transforms"],
        "measured": asdict(entry),
        "baseline": asdict(baseline),
        "violation": broke,
        "score": 0.0 if broke else score(rules, entry, baseline, budget),
        "environment": environment(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


RECORD_KEYS = {"event", "name", "run", "checkpoint_sha256", "transforms", "measured",
               "baseline", "violation", "score", "environment", "when"}  # fmt: skip


def valid(record) -> bool:
    """A result record as run_event writes it: the keys, finite numbers, a known event."""
    from tinytorch.olympics.events import EVENTS, Measured

    if not isinstance(record, dict) or set(record) != RECORD_KEYS:
        return False
    if record["event"] not in EVENTS or not isinstance(record["score"], (int, float)):
        return False
    try:
        for side in ("measured", "baseline"):
            Measured(**record[side])
    except TypeError:
        return False
    return math.isfinite(record["score"]) and record["score"] >= 0


def leaderboard(records: list[dict]) -> dict[str, list[dict]]:
    """Valid records by event, best first; an entrant's best entry only."""
    board: dict[str, dict[str, dict]] = {}
    for r in filter(valid, records):
        best = board.setdefault(r["event"], {})
        if r["name"] not in best or r["score"] > best[r["name"]]["score"]:
            best[r["name"]] = r
    return {e: sorted(b.values(), key=lambda r: -r["score"]) for e, b in board.items()}
