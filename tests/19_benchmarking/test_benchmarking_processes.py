"""Module 19's processes: each candidate runs in a Python of its own, in alternating order, and
every result carries the conditions it was measured under."""

import os

import pytest

from tinytorch.bench.processes import benchmark, environment, run_isolated


def sleeper(seconds=0.0):
    """A candidate factory: the callable to time (this test file is importable as a module)."""
    return lambda: sum(range(100))


TARGET = "test_benchmarking_processes:sleeper"


@pytest.fixture(autouse=True)
def importable(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(__file__))


def test_a_candidate_runs_in_a_process_of_its_own():
    result = run_isolated(TARGET, {}, warmup=1, repeats=4)
    assert result["pid"] != os.getpid() and len(result["seconds"]) == 4
    assert result["environment"]["cpus"] == os.cpu_count()


def test_benchmark_alternates_and_summarises_every_candidate():
    record = benchmark({"a": (TARGET, {}), "b": (TARGET, {"seconds": 0})}, rounds=2, repeats=3)
    assert [r["name"] for r in record["runs"]] == ["a", "b", "b", "a"]
    assert len({r["pid"] for r in record["runs"]}) == 4
    a, b = record["candidates"]["a"], record["candidates"]["b"]
    assert a["summary"]["n"] == b["summary"]["n"] == 6
    assert a["against_a"] is None and b["against_a"]["verdict"] in (
        "slower",
        "faster",
        "no difference",
    )


def test_the_environment_names_the_blas_and_the_load():
    env = environment()
    assert env["blas"] and env["blas"][0]["internal_api"]
    assert len(env["load"]) == 3 and env["numpy"]


def test_a_failing_candidate_is_one_clear_error():
    with pytest.raises(RuntimeError, match="failed in its process"):
        run_isolated("no_such_module:nothing", {}, repeats=1)
    with pytest.raises(ValueError, match="package.module:function"):
        run_isolated("nocolon")
