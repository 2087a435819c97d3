"""Shared test setup: make sure the tinytorch under test is the one tito staged."""

import os
from pathlib import Path

import numpy as np
import pytest


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
