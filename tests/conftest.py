"""Shared test setup: make sure the tinytorch under test is the one tito staged."""

import os
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

# The suite runs thousands of small matmuls: one BLAS thread avoids thread contention (measured
# 240 ms vs 17 ms of CPU per training step on a loaded 2-core machine). OPENBLAS_CORETYPE is left
# alone.
threadpool_limits(1)


def pytest_configure(config):
    expected = os.environ.get("TINYTORCH_EXPECT")
    if expected:
        import tinytorch

        found = Path(tinytorch.__file__).resolve().parent
        if found != Path(expected).resolve():
            raise pytest.UsageError(
                f"tests imported tinytorch from {found}, expected the staged copy {expected}"
            )


@pytest.fixture
def rng():
    return np.random.default_rng(0)
