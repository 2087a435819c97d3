"""Shared test setup: make sure the tinytorch under test is the one tito staged; set aside the
tests that need PyTorch where it is not installed (a student's `pip install -e .`)."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

# The suite runs thousands of small matmuls: one BLAS thread avoids thread contention (measured
# 240 ms vs 17 ms of CPU per training step on a loaded 2-core machine). OPENBLAS_CORETYPE is left
# alone. The processes the tests start (milestone runs, `tito` in a process of its own, the
# module tests that `complete` runs) inherit the environment, not this process's limit: numpy's
# OpenBLAS reads OPENBLAS_NUM_THREADS when it loads (a subprocess milestone run measured 39 s
# with two BLAS threads, 20 s with one). A value the caller set is kept.
threadpool_limits(1)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# Where PyTorch is missing, these are set aside with one line of reason instead of failing: the
# folders that import torch at the top, and the tests marked `needs_torch`. `make test` sets
# TINYTORCH_REQUIRE_TORCH=1, so in CI a missing torch is an error, never a quiet deselection.
HAS_TORCH = importlib.util.find_spec("torch") is not None
REQUIRE_TORCH = os.environ.get("TINYTORCH_REQUIRE_TORCH", "") not in ("", "0")
TORCH_FOLDERS = ["huggingface", "torch_baseline"]
WITHOUT_TORCH = (
    "set aside the tests that need PyTorch (tests/huggingface, tests/torch_baseline, marker "
    "needs_torch): it is not installed, and only the development extra needs it"
)
collect_ignore = [] if HAS_TORCH or REQUIRE_TORCH else TORCH_FOLDERS


# `make test` runs the suite as two pytest processes side by side (most tests keep one core
# busy): `--half 1` is tito's tests, `--half 2` everything else, the two long walks over every
# module and the milestone runs on modules written to the letter. Both collect the whole suite
# and keep their part, so together they run every test once.
SECOND_HALF = (
    "tests/tito/test_complete_every_module.py",
    "tests/tito/test_probe_seeds.py",
    "tests/tito/test_contracts_across_modules.py",  # milestone runs, as tests/milestone_runs
    "tests/tito/test_edition_every_module.py",  # every module's tests again, in an edition
)


def half_of(nodeid: str) -> int:
    """Which of `make test`'s two processes runs the test with this node id."""
    path = nodeid.split("::")[0]
    return 1 if path.startswith("tests/tito/") and path not in SECOND_HALF else 2


def pytest_addoption(parser):
    parser.addoption("--half", type=int, choices=(1, 2), help="run one half of the suite")


def pytest_collection_modifyitems(config, items):
    half = config.getoption("--half")
    if half:
        other = [item for item in items if half_of(item.nodeid) != half]
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if half_of(item.nodeid) == half]
    if HAS_TORCH or REQUIRE_TORCH:
        return
    aside = [item for item in items if item.get_closest_marker("needs_torch") is not None]
    if aside:
        config.hook.pytest_deselected(items=aside)
        items[:] = [item for item in items if item.get_closest_marker("needs_torch") is None]


def pytest_report_header(config):
    return None if HAS_TORCH or REQUIRE_TORCH else WITHOUT_TORCH


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not (HAS_TORCH or REQUIRE_TORCH):
        terminalreporter.write_line(f"tinytorch: {WITHOUT_TORCH}")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_torch: compares with PyTorch itself; deselected where torch is missing"
    )
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
