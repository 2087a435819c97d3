"""The Torch Olympics' events and what the tool measures: the contest's rules as data.

`EVENTS` names each event, the measurement it ranks (a field of `Measured`, or the all-around
"score"), which way is better, how far held-out bits/char may rise above the baseline's, and
whether the tool trains the entry within a budget of CPU-seconds. `Measured` is what the tool
measured of one entry (never what the entry says of itself). Module 20's judge
(`tinytorch/olympics/rules.py`) decides with them; the olympics milestone and `tito olympics`
measure into them.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson; it imports nothing from the course.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Contest:
    """One event of the contest and its rules: what ranks (a field of `Measured`), which way, and what must hold."""

    name: str
    metric: str  # "tokens_per_second", "bytes", "bits_per_char" or "score"
    higher_is_better: bool
    quality_slack: float | None  # bits/char may exceed the baseline's by this fraction
    trained_within_budget: bool  # the tool trained the model within a CPU-second budget
    summary: str


EVENTS: dict[str, Contest] = {
    e.name: e
    for e in (
        Contest("speed", "tokens_per_second", True, 0.02, False,
              "fastest cached generation, bits/char within 2% of the baseline"),
        Contest("size", "bytes", False, 0.05, False,
              "smallest weights in bytes, bits/char within 5% of the baseline"),
        Contest("quality", "bits_per_char", False, None, True,
              "best held-out bits/char after a fixed budget of CPU-seconds of training"),
        Contest("all-around", "score", True, 0.05, False,
              "geometric mean of the speed, size and quality improvements"),
    )
}  # fmt: skip

# The measurements an event can rank, and which way is better for each.
HIGHER_IS_BETTER = {"tokens_per_second": True, "bytes": False, "bits_per_char": False}


@dataclass(frozen=True)
class Measured:
    """What the tool measured for one entry (never what the entry says about itself)."""

    tokens_per_second: float
    bytes: int
    bits_per_char: float
    train_cpu_seconds: float = 0.0  # the quality event's training, measured by the tool
    # bits/char on the held-out text, its sentences shuffled: the memorisation test (milestones)
    shuffled_bits_per_char: float | None = None

    def metric(self, name: str) -> float:
        """The measurement an event ranks by name: tokens_per_second, bytes or bits_per_char."""
        values = {"tokens_per_second": self.tokens_per_second, "bytes": self.bytes,
                  "bits_per_char": self.bits_per_char}  # fmt: skip
        return float(values[name])


def event(name: str) -> Contest:
    """The event called `name`, or a ValueError that lists the events."""
    if name not in EVENTS:
        raise ValueError(f"no event '{name}'; the events are: {', '.join(EVENTS)}")
    return EVENTS[name]


__all__ = ["Contest", "EVENTS", "HIGHER_IS_BETTER", "Measured", "event"]
