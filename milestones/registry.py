"""The registry: every milestone with what it needs, its entry point and its model size.

Importing this file imports no tinytorch code, so a caller can list the milestones and check
their requirements before the package is complete; `Milestone.run` and `Milestone.config` import
the milestone's code when they are used.

To add a milestone: write `milestones/NAME.py` with `run(milestone, options) -> dict` (the
summary it wrote), then add one `Milestone` below.
"""

from __future__ import annotations

import difflib
import importlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from milestones.errors import MilestoneError
from milestones.folder import removed_if_left_empty


@dataclass(frozen=True)
class RunOptions:
    """What a caller may choose for a run; None means the milestone's default."""

    out: Path
    quick: bool = False
    data: Path | None = None
    steps: int | None = None
    seed: int | None = None
    resume: bool = False
    config: str | None = None  # a name in tinytorch's PRESETS
    tokenizer: str | None = None  # "char" or "bpe" (module 10's tokenizers)
    data_dir: Path | None = None  # where corpora and learned tokenizers are cached; None: nowhere
    # course modules the student completed (their own code in the package); the rest are the
    # reference's, which a run may accelerate (milestones/provenance.py)
    completed: frozenset[int] = frozenset()
    console: Console = field(default_factory=Console)
    allow_partial: bool = False  # work on a GPT run that stopped before its last step

    def refuse(self, milestone: str, why: dict[str, str]) -> None:
        """A MilestoneError for the first option given that `milestone` has no use for.

        `why` maps an option ("--data", "--resume", "--tokenizer", "--config", "--steps",
        "--allow-partial") to
        the reason it does not apply, e.g. {"--data": "makes its own corpus"}.
        """
        given = {
            "--data": self.data is not None,
            "--resume": self.resume,
            "--tokenizer": self.tokenizer is not None,
            "--config": self.config is not None,
            "--steps": self.steps is not None,
            "--allow-partial": self.allow_partial,
        }
        for option, reason in why.items():
            if given[option]:
                raise MilestoneError(
                    f"{option} does not apply to {milestone}: it {reason}",
                    hint=f"run `tito milestone run {milestone}` without {option}",
                )

    def size(self, choices, quick: str, usual: str, stored: str | None = None) -> str:
        """The size a run trains, one of `choices`: --config, else `stored` (a checkpoint's),
        else `quick` with --quick, else `usual` (the milestone's preset)."""
        name = self.config or stored or (quick if self.quick else usual)
        if name not in choices:
            raise MilestoneError(
                f"unknown --config '{name}'", hint=f"choose one of: {', '.join(choices)}"
            )
        return name

    def check(self) -> None:
        """Reject values no milestone can use, naming the option."""
        if self.seed is not None and self.seed < 0:
            raise MilestoneError(
                f"--seed must be a whole number >= 0, got {self.seed}", hint="e.g. --seed 0"
            )
        if self.steps is not None and self.steps < 1:
            raise MilestoneError(
                f"--steps must be at least 1, got {self.steps}", hint="e.g. --steps 200"
            )


@dataclass(frozen=True)
class Milestone:
    name: str
    description: str
    requires: tuple[int, ...]  # course module numbers whose package files the run imports
    entry: str  # "package.module:function", called as function(milestone, options)
    preset: str | None  # its default model size, a name in tinytorch's PRESETS (None: no GPT)
    year: int  # the year of the result it reproduces; the list is in historical order
    # wall-clock seconds of (--quick, the full run) measured on 2 idle cores (milestones/RESULTS.md,
    # "Stated times"); `tito milestone list` and the README state them through `stated`
    seconds: tuple[float | None, float | None] = (None, None)

    def stated(self, quick: bool, brief: bool = False) -> str:
        """The run's length as the README says it, e.g. "about 15 s"; `brief`, as `tito
        milestone list` says it in a narrow column, e.g. "15 s"."""
        return stated(self.seconds[0 if quick else 1], brief)

    @property
    def config(self):
        """The default model config, `PRESETS[self.preset]` (a GPTConfig)."""
        if self.preset is None:
            raise MilestoneError(f"milestone {self.name} trains no GPT and has no model preset")
        from tinytorch.models.transformer import PRESETS

        return PRESETS[self.preset]

    def run(self, options: RunOptions) -> dict:
        """Check the options, run the milestone, return the summary it wrote."""
        options.check()
        module, function = self.entry.split(":")
        with removed_if_left_empty(options.out):
            try:
                return getattr(importlib.import_module(module), function)(self, options)
            except FloatingPointError as err:  # module 07's train_step refused a nan or inf loss
                raise MilestoneError(
                    f"{self.name} stopped: {err}",
                    hint="a completed module may compute a wrong result: `tito module test N`",
                ) from None


def stated(seconds: float | None, brief: bool = False) -> str:
    """A measured length of time, rounded the way a person would say it (rounded up, so the
    figure holds): "about 15 s", "about 4 minutes"; `brief`: "15 s", "4 min"."""
    if seconds is None:
        return "?" if brief else "not measured"
    if seconds < 10:
        return "< 10 s" if brief else "a few seconds"
    if seconds < 90:
        said = f"{5 * math.ceil(seconds / 5)} s"
    else:
        said = f"{math.ceil(seconds / 60)} {'min' if brief else 'minutes'}"
    return said if brief else f"about {said}"


_GPT_MODULES = (1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 17, 18)  # 08: windows; 17: KV cache

MILESTONES: tuple[Milestone, ...] = (
    Milestone(
        "perceptron",
        "Rosenblatt's rule finds a line between two classes of points.",
        (1, 2, 3),
        entry="milestones.perceptron:run",
        preset=None,
        year=1957,
        seconds=(1.6, 1.8),
    ),
    Milestone(
        "xor",
        "One layer cannot learn XOR; two layers trained by backpropagation can.",
        (1, 2, 3, 4, 5, 6),
        entry="milestones.xor:run",
        preset=None,
        year=1969,
        seconds=(2.0, 2.0),
    ),
    Milestone(
        "mlp",
        "A multi-layer perceptron reads handwritten digits (test accuracy above 95%).",
        (1, 2, 3, 4, 5, 6, 7, 8),
        entry="milestones.mlp:run",
        preset=None,
        year=1986,
        seconds=(2.2, 2.0),
    ),
    Milestone(
        "cnn",
        "A LeNet-style convolutional network beats the MLP with fewer parameters.",
        (1, 2, 3, 4, 5, 6, 7, 8, 9),
        entry="milestones.cnn:run",
        preset=None,
        year=1998,
        seconds=(5.3, 7.9),
    ),
    Milestone(
        "attention",
        "Reverse a sequence of digits: a task only attention can solve.",
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13),
        entry="milestones.attention:run",
        preset="tiny",
        year=2017,
        seconds=(17.3, 16.3),
    ),
    Milestone(
        "gpt",
        "Train a GPT on Python's own documentation, make it write, report its scaling.",
        _GPT_MODULES,
        entry="milestones.gpt:run",
        preset="small",
        year=2017,
        seconds=(31.3, 215),
    ),
    Milestone(
        "translate",
        "Number words to digits with an encoder-decoder: alignment plots, pre- vs post-norm.",
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 17),
        entry="milestones.translate:run",
        preset="tiny",
        year=2017,
        seconds=(10.5, 64.8),
    ),
    Milestone(
        "olympics",
        "The Torch Olympics on the trained GPT: plain, accelerated, int8, pruned, low rank.",
        (*_GPT_MODULES, 15, 16, 19, 20),
        entry="milestones.torch_olympics:run",
        preset="small",
        year=2018,  # DAWNBench: systems ranked by time to a fixed quality
        seconds=(31.9, 69.5),
    ),
    Milestone(
        "compress",
        "Quantize, prune, factorise and distil the trained GPT: one table and a Pareto plot.",
        (*_GPT_MODULES, 15, 16),
        entry="milestones.compress:run",
        preset="small",
        year=2019,  # DistilBERT: a transformer distilled to 60% of its size keeps 97% of its score
        seconds=(7.5, 223),
    ),
    Milestone(
        "scaling",
        "Parameter, memory and generation-speed reports from tiny to GPT-3 scale, no training.",
        _GPT_MODULES,
        entry="milestones.gpt:run_scaling",
        preset="small",
        year=2020,
        seconds=(2.4, 8.8),
    ),
    Milestone(
        "llama",
        "A Llama against a GPT of its size, same text and CPU time: bits, speed, KV cache.",
        (*_GPT_MODULES, 21),  # 18: the training helpers import it; both models run plain
        entry="milestones.llama:run",
        preset="small",
        year=2023,  # Llama: RMSNorm, rotary positions, SwiGLU; Llama 2 added grouped-query heads
        seconds=(28, None),  # --quick: 27.3 s of CPU on a loaded host; the full run not timed
    ),
)


def find(name: str) -> Milestone:
    """The milestone called `name` (case and spaces ignored), else a MilestoneError naming all."""
    for milestone in MILESTONES:
        if milestone.name == name.strip().lower():
            return milestone
    known = ", ".join(m.name for m in MILESTONES)
    close = difflib.get_close_matches(name.strip().lower(), [m.name for m in MILESTONES], n=1)
    if close:
        raise MilestoneError(f"unknown milestone '{name}'; did you mean '{close[0]}'?", hint=known)
    raise MilestoneError(f"unknown milestone '{name}'", hint=f"choose one of: {known}")
