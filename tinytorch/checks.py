"""Graded checks as data: what a check computes, so a judge can compare it with the reference.

Given code (no course exercise writes it). Each graded cell of a course notebook is a probe: a
function of a random generator that calls the student's code and returns raw numbers.

    @graded(rtol=1e-4, atol=1e-6, grades="layernorm")
    def test_layernorm(rng):
        x = Tensor(rng.normal(size=(2, 4, 16)), requires_grad=True)
        y = LayerNorm(16)(x)
        y.backward(rng.normal(size=y.shape))
        return {"y": y.data, "dx": x.grad}

In a notebook, `@graded` runs the probe at once on a fixed seed: the student sees it run, and
whatever it asserts. A grade never trusts that run. The grader calls the same probe, taken from
the course's source, on a fresh seed, once over the student's export and once over the
reference, each in a sandbox of its own; a third process, which imported neither, compares the
returned numbers with the tolerances given here.

`grades` names the solution cell(s) (their grade ids) the check measures. When the student's run
fails, the grader runs the check again with the reference's code in every other solution cell of
the module: the check passes when the student's declared cell(s), alone among the reference's,
match. A slip costs the checks that declare its cell, and no other.
"""

from __future__ import annotations

import numpy as np

NOTEBOOK_SEED = 0  # the seed a probe runs on in a notebook; the grader picks its own


class Collect:
    """While `Collect.probes` is a list, `@graded` records probes instead of running them."""

    probes: list | None = None


def outputs(result) -> dict[str, np.ndarray]:
    """A probe's result as {name: numeric array}; a TypeError naming what is wrong otherwise."""
    if not isinstance(result, dict) or not result:
        raise TypeError(f"a graded probe returns a dict of arrays, got {type(result).__name__}")
    arrays = {}
    for name, value in result.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"a graded probe's keys are plain names, got {name!r}")
        value = getattr(value, "data", value)  # a Tensor gives its array
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(_not_numeric(name, array))
        arrays[name] = array
    return arrays


def _not_numeric(name: str, array: np.ndarray) -> str:
    """Why `name` is not numbers, in the student's terms: a None among them is nearly always a
    parameter that took no part in the computation, so its gradient was never set."""
    if array.dtype == object and any(item is None for item in array.ravel()):
        return (
            f"'{name}' holds None where numbers belong: a parameter got no gradient (its .grad "
            "is None), so it took no part in the forward pass; check that every layer and "
            "embedding you create is used"
        )
    return f"'{name}' is not numbers (it holds {array.dtype} values)"


def graded(rtol: float = 1e-4, atol: float = 1e-6, grades: str | tuple[str, ...] = ()):
    """Mark a probe `fn(rng) -> {name: array}` as a graded check with these tolerances, which
    measures the solution cell(s) `grades` (grade ids; the grader reads them from the source)."""
    cells = (grades,) if isinstance(grades, str) else tuple(grades)

    def mark(fn):
        fn.tolerance = {"rtol": float(rtol), "atol": float(atol)}
        fn.grades = cells
        if Collect.probes is not None:
            Collect.probes.append(fn)
        else:
            outputs(fn(np.random.default_rng(NOTEBOOK_SEED)))
        return fn

    return mark


__all__ = ["NOTEBOOK_SEED", "Collect", "outputs", "graded"]
