"""The records module 14's profiler makes: one `OpEvent` per forward or backward of an operation,
one `OpRow` per (operation, phase) of a table, and the names of a model's layers.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: module 14's `Profiler` fills `OpEvent`s
and its `by_operation` sums them into `OpRow`s; the report reads their `kind`, `gflops` and
`intensity`. Only numbers are kept, so this file imports no model.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinytorch.profile.rules import MATMUL_OPS

OUTSIDE = "(outside operations)"  # the row of the wall time no operation accounts for


@dataclass
class OpEvent:
    """One forward or backward of one operation."""

    op: str  # the Function's class name
    phase: str  # "forward" or "backward"
    seconds: float
    matmul_flops: int
    other_flops: int | None  # None: an operation the rules do not know
    bytes_moved: int  # arrays read and written
    kept_bytes: int  # forward output the graph keeps for the backward (0 otherwise)
    layer: str  # dotted name of the innermost layer running it ("" outside any)

    @property
    def flops(self) -> int:
        return self.matmul_flops + (self.other_flops or 0)


@dataclass
class OpRow:
    """The events of one (op, phase) summed; `share` is of the wall time."""

    op: str
    phase: str
    calls: int
    seconds: float
    matmul_flops: int
    other_flops: int | None
    bytes_moved: int
    share: float = 0.0

    @property
    def flops(self) -> int:
        return self.matmul_flops + (self.other_flops or 0)

    @property
    def kind(self) -> str:
        return "matmul" if self.op in MATMUL_OPS else "outside" if self.op == OUTSIDE else "other"

    @property
    def gflops(self) -> float:
        """Achieved GFLOP/s."""
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved: where the operation sits on the roofline's x axis."""
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0


def module_names(model) -> dict[int, str]:
    """{id(module): dotted name} for `model` and every module below it; the model is "model"."""
    names = {id(model): "model"}

    def visit(module, prefix):
        for name, child in module.children():
            if hasattr(child, "children") and id(child) not in names:
                names[id(child)] = prefix + name
                visit(child, f"{prefix}{name}.")

    visit(model, "")
    return names


def nbytes(arrays) -> int:
    """Bytes of the arrays among `arrays` (None and non-arrays count nothing)."""
    return sum(getattr(a, "nbytes", 0) for a in arrays if a is not None)


__all__ = ["OUTSIDE", "OpEvent", "OpRow", "module_names", "nbytes"]
