"""`@graded` probes (tinytorch.checks): run at once in a notebook, recorded while a grader
collects them, and only dicts of numeric arrays count as an answer."""

import numpy as np
import pytest

from tinytorch.checks import Collect, graded, outputs
from tinytorch.core.tensor import Tensor


def test_a_probe_runs_at_once_on_the_notebook_seed_and_keeps_its_tolerance():
    seen = []

    @graded(rtol=1e-3, atol=0)
    def test_probe(rng):
        seen.append(rng.integers(1 << 30))
        return {"y": Tensor([1.0, 2.0]), "n": 3}

    assert seen == [np.random.default_rng(0).integers(1 << 30)]
    assert test_probe.tolerance == {"rtol": 1e-3, "atol": 0.0}


def test_while_collecting_probes_are_recorded_not_run():
    Collect.probes = []
    try:

        @graded()
        def test_probe(rng):
            raise AssertionError("must not run while collecting")

        assert Collect.probes == [test_probe]
    finally:
        Collect.probes = None


@pytest.mark.parametrize(
    "result", [None, {}, [1.0], {"y": "text"}, {1: np.ones(2)}, {"y": object()}, {"a b": 1}]
)
def test_anything_but_named_numbers_is_refused(result):
    with pytest.raises(TypeError):
        outputs(result)


def test_a_failing_probe_fails_the_cell():
    with pytest.raises(AssertionError):

        @graded()
        def test_probe(rng):
            raise AssertionError("wrong")
