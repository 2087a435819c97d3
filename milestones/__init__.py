"""The milestones: end-to-end runs that use the tinytorch package the student built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tito.catalog import MODULES, CourseModule


@dataclass(frozen=True)
class Milestone:
    name: str
    description: str
    requires: tuple[int, ...]  # course module numbers whose package files the run imports

    def modules(self) -> list[CourseModule]:
        return [m for m in MODULES if m.number in self.requires]

    def missing(self, root: Path) -> list[CourseModule]:
        """Required modules with at least one package file absent under `root`."""
        return [
            m for m in self.modules() if not all((root / f).is_file() for f in m.package_files())
        ]


_GPT_MODULES = (1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13)

MILESTONES: tuple[Milestone, ...] = (
    Milestone(
        "attention",
        "Reverse a sequence of digits: a task only attention can solve (under a minute).",
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13),
    ),
    Milestone(
        "gpt",
        "Train a character-level GPT, make it write, and report parameter and memory scaling.",
        _GPT_MODULES,
    ),
    Milestone(
        "translate",
        "Number words to digits with an encoder-decoder: alignment plots, pre- vs post-norm.",
        (1, 2, 3, 4, 5, 6, 7, 11, 12, 13),
    ),
    Milestone(
        "scaling",
        "Parameter, memory and generation-speed reports from tiny to GPT-3 scale, no training.",
        _GPT_MODULES,
    ),
)


def find(name: str) -> Milestone | None:
    for milestone in MILESTONES:
        if milestone.name == name.strip().lower():
            return milestone
    return None
