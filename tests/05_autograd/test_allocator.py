"""`import tinytorch` asks glibc to keep freed memory for reuse (tinytorch/core/allocator.py)."""

import ctypes
import subprocess
import sys

from tinytorch.core.allocator import keep_freed_memory


def _has_mallopt() -> bool:
    try:
        ctypes.CDLL(None).mallopt  # noqa: B018 - the attribute lookup is the check
    except (OSError, AttributeError):
        return False
    return sys.platform.startswith("linux")


def test_sets_the_thresholds_where_glibc_allows_it():
    assert keep_freed_memory() is _has_mallopt()


def test_opt_out_by_environment(monkeypatch):
    monkeypatch.setenv("TINYTORCH_KEEP_FREED_MEMORY", "0")
    assert keep_freed_memory() is False


def test_the_course_machine_has_glibc_mallopt():
    # the tests run on Linux with glibc (CI and the course image); elsewhere the reuse test below
    # would measure nothing, so this one says so instead of letting it pass silently
    assert _has_mallopt(), "these tests need Linux with glibc's mallopt"


def faults_printed(code: str) -> int:
    """Run `code` in a fresh Python (tinytorch imported by it) and read the count it prints."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_freed_array_of_a_few_mib_is_reused_not_refaulted():
    code = (
        "import resource, numpy as np, tinytorch\n"
        "a = np.ones(1 << 20, np.float32); del a\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(20):\n"
        "    b = np.ones(1 << 20, np.float32); del b\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    faults = faults_printed(code)
    assert faults < 50  # without it: hundreds (each fresh 4 MiB mapping faults its pages in)


def test_a_step_that_frees_200_mib_at_once_gets_it_back_without_faults():
    """A medium GPT's backward frees a few hundred MiB at its end; glibc must keep it for the
    next forward instead of trimming the top of its heap (issue 39: 15,000 faults a step)."""
    code = (
        "import resource, numpy as np, tinytorch\n"
        "def step():\n"
        "    kept = [np.ones(1 << 21, np.float32) for _ in range(25)]  # 25 x 8 MiB\n"
        "    del kept\n"
        "step()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(3):\n"
        "    step()\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    faults = faults_printed(code)
    assert faults < 500  # trimmed at 128 MiB: about 3 x 51,000 (every page of 200 MiB again)


def test_a_worker_thread_reuses_freed_memory_too():
    """`accelerate` splits a batch over threads; glibc gives each thread an arena of its own and
    unmaps an arena's heap once everything in it is freed, so the slice on the second thread
    faulted its temporaries in again at every step (issue 39: 3,600 faults and 30 ms of system
    time a medium step). Every thread now shares the one arena that keeps freed memory."""
    code = (
        "import resource, threading, numpy as np, tinytorch\n"
        "def step():\n"
        "    kept = [np.ones(1 << 21, np.float32) for _ in range(25)]  # 25 x 8 MiB\n"
        "    del kept\n"
        "def run():\n"
        "    step()\n"
        "    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt\n"
        "    for _ in range(3):\n"
        "        step()\n"
        "    print(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)\n"
        "worker = threading.Thread(target=run)\n"
        "worker.start()\n"
        "worker.join()\n"
    )
    faults = faults_printed(code)
    assert faults < 500  # an arena of its own: heaps of 64 MiB, unmapped once empty, so most
    # of the 200 MiB faults in again at every step
