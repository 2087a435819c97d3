"""Run a module's pytest suite in a fresh interpreter, report each test live, and read back the
real counts and, for every failure, the test, its first message and where it happened.

The run is bounded: a timeout kills the whole process group, and the tests' own output (a
student's prints included) is drained through a pipe of which only the last lines are kept.
"""

from __future__ import annotations

import json
import linecache
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tito.curriculum import paths
from tito.curriculum.catalog import CourseModule
from tito.errors import TitoError

DEFAULT_TIMEOUT = 900.0  # seconds; the slowest module takes about a minute on 2 busy cores
TIMEOUT_ENV = "TITO_TEST_TIMEOUT"
CHECKS_ENV = "TITO_CHECKS"  # the check program's file, read by tito/student/graded_checks.py
KEPT_LINES = 60  # of the tests' own output, shown only when pytest itself could not run
STACK_FRAME = re.compile(r'File "([^"]+)", line (\d+)')

# (path relative to tinytorch/, line) -> the place in the student's notebook, or None
Locate = Callable[[Path, int], object]


@dataclass
class Failure:
    test: str  # pytest node id, e.g. tests/01_tensor/test_tensor_ops.py::test_add
    message: str
    places: list[str] = field(default_factory=list)  # innermost first; notebook cells if any


@dataclass
class TestRun:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[Failure] = field(default_factory=list)
    output: str = ""  # the last lines pytest printed (a student's prints included)
    returncode: int = 0
    timed_out: str | None = None  # what was running when the timeout struck
    seconds: float = 0.0
    limit: float = 0.0  # the timeout, in seconds

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.failed == 0 and self.passed > 0 and not self.timed_out


def timeout_seconds(option: float | None = None) -> float:
    if option is not None:
        value, origin = option, "--timeout"
    else:
        raw = os.environ.get(TIMEOUT_ENV)
        if not raw:
            return DEFAULT_TIMEOUT
        try:
            value, origin = float(raw), TIMEOUT_ENV
        except ValueError:
            raise TitoError(
                f"{TIMEOUT_ENV}={raw!r} is not a number of seconds",
                hint=f"e.g. export {TIMEOUT_ENV}=900, or unset it",
            ) from None
    if value <= 0:
        raise TitoError(f"{origin} must be a positive number of seconds, not {value:g}")
    return value


class _Tail:
    """Drain a pipe in a thread, keeping only its last lines (bounded memory, no disk)."""

    def __init__(self, pipe):
        self.lines: deque[str] = deque(maxlen=KEPT_LINES)
        self.thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self.thread.start()

    def _drain(self, pipe) -> None:
        partial = b""
        while chunk := pipe.read1(65536):
            partial += chunk
            *done, partial = partial.split(b"\n")
            for line in done[-KEPT_LINES:]:
                self.lines.append(line[:500].decode("utf-8", "replace"))
            partial = partial[-4096:]  # a line without end is kept only in part
        if partial:
            self.lines.append(partial[:500].decode("utf-8", "replace"))

    def text(self) -> str:
        self.thread.join(timeout=5)
        return "\n".join(self.lines)


class _Events:
    """Read the JSON lines the plugin appends, as they come."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = ""

    def new(self) -> list[dict]:
        if not self.path.exists():
            return []
        with open(self.path, encoding="utf-8") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
            self.offset = handle.tell()
        *lines, self.partial = (self.partial + chunk).split("\n")
        return [json.loads(line) for line in lines if line.strip()]


def run_tests(
    module: CourseModule,
    package_parent: Path | None = None,
    extra=(),
    *,
    locate: Locate | None = None,
    timeout: float | None = None,
    on_event: Callable[[dict], None] | None = None,
    checks: Path | None = None,
) -> TestRun:
    """Run tests/NN_slug; the tests must import `tinytorch/` from `package_parent` if given.
    `checks`: a check program (tito/student/graded_checks.py) whose checks run as tests too."""
    root = paths.root()
    limit = timeout_seconds(timeout)
    package = (package_parent or root) / "tinytorch"
    env = dict(os.environ)
    if package_parent is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(package_parent), env.get("PYTHONPATH", "")])
        env["TINYTORCH_EXPECT"] = str(package)
        shared = Path(package_parent) / "data"
        if not shared.exists() and (root / "data").is_dir():
            shared.symlink_to(root / "data")  # the shipped data, beside the staged package
    # the plugin lives in tito: make sure the child imports this very copy of it
    env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH", ""), str(paths.PACKAGE_ROOT)])
    env.pop(CHECKS_ENV, None)
    plugins = ["-p", "tito.student.pytest_events"]
    if checks is not None:
        env[CHECKS_ENV] = str(checks)
        plugins += ["-p", "tito.student.graded_checks"]
    run = TestRun(limit=limit)
    outcomes: dict[str, str] = {}
    running = None
    with tempfile.TemporaryDirectory(prefix="tito-run-") as tmp:
        events_path = Path(tmp) / "events.jsonl"
        env["TITO_EVENTS"] = str(events_path)
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            str(root / module.tests),
            "-q",
            "-s",  # the tests' output streams to our pipe instead of pytest's memory
            "--tb=short",
            *plugins,
            f"--rootdir={root}",
            "-c",
            str(root / "pyproject.toml"),
            *extra,
        ]
        # `python -m` puts the working directory first on sys.path: run from the folder that
        # holds the tinytorch under test, so no other copy can shadow it. A session of its own
        # lets a timeout or Ctrl-C stop every process the tests started.
        proc = subprocess.Popen(
            cmd,
            cwd=package_parent if package_parent is not None else root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        tail = _Tail(proc.stdout)
        events = _Events(events_path)
        start = time.monotonic()
        try:
            while True:
                done = proc.poll() is not None
                for event in events.new():
                    running = _take(event, run, outcomes, running, package, root, locate)
                    if on_event is not None:
                        on_event(event)
                if done:
                    break
                if time.monotonic() - start > limit:
                    run.timed_out = _stop(proc, events_path, running, package, locate)
                    break
                time.sleep(0.05)
        finally:
            _kill(proc)
            proc.wait()
        run.seconds = time.monotonic() - start
        run.output = tail.text()
    run.returncode = proc.returncode
    if not run.timed_out and proc.returncode not in (0, 1, 5) and run.failed == 0:
        run.failed = 1  # pytest itself broke (collection or usage error): never count a pass
    return run


def _take(event, run, outcomes, running, package, root, locate):
    """Fold one plugin event into the run; returns the test now running."""
    kind = event["kind"]
    if "message" in event:  # "… from 'x' (/tmp/tito-stage-…/tinytorch/…)": the package's path
        event["message"] = event["message"].replace(f"{package.parent}{os.sep}", "")
    if kind == "start":
        return event["nodeid"]
    if kind == "error":
        run.failed += 1
        places = _places(event.get("frames", []), package, root, locate)
        run.failures.append(Failure(event["nodeid"] or "collecting", event["message"], places))
    elif kind == "test":
        nodeid, outcome = event["nodeid"], event["outcome"]
        previous = outcomes.get(nodeid)
        if previous in ("failed", "error"):
            return None  # a teardown error after a failure: counted once
        if previous == "passed":
            run.passed -= 1
        elif previous == "skipped":
            run.skipped -= 1
        outcomes[nodeid] = outcome
        if outcome == "passed":
            run.passed += 1
        elif outcome == "skipped":
            run.skipped += 1
        else:
            run.failed += 1
            places = event.get("places") or _places(event.get("frames", []), package, root, locate)
            run.failures.append(Failure(nodeid, event.get("message", outcome), places))
        return None
    return running


def _places(frames, package: Path, root: Path, locate: Locate | None) -> list[str]:
    """Where a traceback went, innermost first, never naming a temporary path: the student's
    notebook cells it passed through (up to 3), else the deepest package or test file line."""
    package = package.resolve()
    cells, fallback = [], None
    for path, line in reversed(frames):
        target = Path(path)
        if not target.is_absolute():
            target = root / target
        target = target.resolve()
        if target.is_relative_to(package):
            rel = target.relative_to(package)
            place = locate(rel, line) if locate is not None else None
            if place is not None:
                cells.append(str(place))
            fallback = fallback or f"tinytorch/{rel.as_posix()}, line {line}"
        elif "site-packages" in target.parts:  # numpy's or pytest's code: never the cause
            continue
        elif target.is_relative_to(root) and fallback is None and target.is_file():
            text = linecache.getline(str(target), line).strip()
            fallback = f"{target.relative_to(root).as_posix()}, line {line}"
            fallback += f": {text}" if text else ""
    return cells[:3] if cells else [fallback] if fallback else []


def _stop(proc, events_path: Path, running, package: Path, locate) -> str:
    """Ask pytest where it is stuck (its faulthandler dumps the stack), then stop it."""
    where = None
    if hasattr(signal, "SIGUSR1"):
        try:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(1.0)
            stack = Path(str(events_path) + ".stack").read_text(encoding="utf-8", errors="replace")
        except (OSError, ProcessLookupError):
            stack = ""
        frames = [[p, int(n)] for p, n in STACK_FRAME.findall(stack)]
        # faulthandler lists the innermost frame first; _places expects it last
        places = _places(list(reversed(frames)), package, paths.root(), locate)
        where = places[0] if places else None
    _kill(proc)
    return f"{running or '(collecting the tests)'}" + (f" (at {where})" if where else "")


def _kill(proc) -> None:
    """Stop the whole process group; called before wait(), so the id cannot have been reused."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
