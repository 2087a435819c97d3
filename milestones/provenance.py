"""Whose code a run uses: the student's own modules, and the reference's fast paths only where
they replace no code of the student's.

The package holds the student's export of every module they completed and the reference of
every other one. Module 18's `accelerate` swaps a lesson's layer for its fast version; a run
asks `parts_for(completed)` which parts it may swap, so a completed lesson keeps running the
student's own code unless the student completed module 18 as well.
"""

from __future__ import annotations

ACCELERATION = 18
MEMOIZATION = 17  # the KV cache every generation runs (module 13's generate calls it)
NAMES = {"attention": "attention", "layernorm": "layer norm", "gelu": "GELU", "adamw": "AdamW",
         "embedding": "embedding"}  # fmt: skip


def parts(completed: frozenset[int]) -> tuple[str, ...]:
    """The parts of module 18 this run may accelerate."""
    from tinytorch.accel.accelerate import parts_for

    return parts_for(completed)


def whose(module: int, completed: frozenset[int]) -> str:
    return f"{'your' if module in completed else 'reference'} module {module:02d}"


def code_line(parts: dict[str, int], completed: frozenset[int]) -> str:
    """One line naming whose code each part of a run is, e.g. "code: the GPT your module 13;
    quantization reference module 15; caching your module 17"."""
    return "code: " + "; ".join(f"{part} {whose(n, completed)}" for part, n in parts.items())


def header(completed: frozenset[int], chosen: tuple[str, ...]) -> str:
    """One line naming, per part, whose lesson ran and whose fast version (if any) replaced it.

    e.g. "code: attention your module 12; layer norm reference module 13, accelerated by
    reference module 18; ...; threads given; caching reference module 17"
    """
    from tinytorch.accel.accelerate import LESSONS

    items = []
    for part, lesson in LESSONS.items():
        item = f"{NAMES.get(part, part)} {whose(lesson, completed)}"
        if part in chosen:
            item += f", accelerated by {whose(ACCELERATION, completed)}"
        items.append(item)
    items.append("batch split given")  # DataParallel: given files, no student's code
    items.append(f"caching {whose(MEMOIZATION, completed)}")
    return "code: " + "; ".join(items)
