"""A process per candidate, and the conditions it ran under: module 19's harness put to work.

A candidate is named by `"package.module:function"` plus keyword arguments: the function builds
what to time and returns a zero-argument callable (so building a model is not timed).
`run_isolated` starts a fresh Python for it (`python -c`, with this package on the path), which
times the callable with module 19's `time_calls` and prints one JSON line: its times, its process
id and the conditions (`environment`). `benchmark` puts module 19 together: for each name in
`schedule`, one process; per candidate, the times of all its processes `summarize`d; every
candidate `compare`d with the first.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it builds on module 19's statistics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from tinytorch.bench.harness import compare, schedule, summarize

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_CORETYPE",
)


def environment() -> dict:
    """What a result depends on: load, cores, threads, and numpy's BLAS (threadpoolctl)."""
    import platform

    record = {
        "load": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "thread_env": {k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
    }
    try:
        import threadpoolctl

        blas = [i for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
        record["blas"] = [
            {k: i.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for i in blas
        ]
    except ImportError:
        record["blas"] = None
    return record


CHILD = (
    "import json, sys, importlib, os\n"
    "from tinytorch.bench.harness import time_calls\n"
    "from tinytorch.bench.processes import environment\n"
    "job = json.loads(sys.stdin.read())\n"
    "module, _, name = job['target'].partition(':')\n"
    "fn = getattr(importlib.import_module(module), name)(**job['kwargs'])\n"
    "seconds = time_calls(fn, job['warmup'], job['repeats'])\n"
    "print(json.dumps({'seconds': seconds.tolist(), 'pid': os.getpid(),\n"
    "                  'environment': environment()}))\n"
)


def run_isolated(target: str, kwargs: dict | None = None, warmup: int = 3, repeats: int = 10,
                 timeout: float = 600.0) -> dict:  # fmt: skip
    """Time `target` (package.module:function returning a callable) in a fresh Python."""
    if ":" not in target:
        raise ValueError(f"a target is 'package.module:function', got {target!r}")
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(filter(None, [package_root, os.getcwd(), os.environ.get("PYTHONPATH")]))
    job = {"target": target, "kwargs": kwargs or {}, "warmup": warmup, "repeats": repeats}
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": path},
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"the candidate {target} failed in its process: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def benchmark(candidates: dict[str, tuple[str, dict]], rounds: int = 3, warmup: int = 3,
              repeats: int = 10) -> dict:  # fmt: skip
    """Run every candidate `rounds` times, a process each, in alternating order; summarise each
    and compare every one with the first. Returns a record a report can read (JSON-ready)."""
    if not candidates:
        raise ValueError("give at least one candidate: {name: (target, kwargs)}")
    times: dict[str, list[float]] = {name: [] for name in candidates}
    runs = []
    for name in schedule(list(candidates), rounds):
        target, kwargs = candidates[name]
        result = run_isolated(target, kwargs, warmup, repeats)
        times[name] += result["seconds"]
        runs.append({"name": name, "pid": result["pid"], "environment": result["environment"]})
    base = next(iter(candidates))
    return {
        "environment": environment(),
        "runs": runs,
        "candidates": {
            name: {
                "summary": summarize(t).as_record(),
                "against_" + base: None if name == base else vars(compare(times[base], t)),
            }
            for name, t in times.items()
        },
    }


__all__ = ["THREAD_VARIABLES", "environment", "run_isolated", "benchmark"]
