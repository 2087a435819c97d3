"""How a test run looks to the student: a live line while it runs, then each failing test with
its first message and the notebook cell it points at."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import PurePosixPath

from tito.cli.console import console, fail, ok, safe
from tito.student.runner import TIMEOUT_ENV, Failure, TestRun

SHOWN_GROUPS = 8  # distinct failures (same error, same place)
SHOWN_NAMES = 10  # further tests listed per failure


class LiveProgress:
    """A status line per test while pytest runs, and one line per finished test file."""

    def __init__(self, label: str):
        self.label = label
        self.per_file: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.bad: Counter[str] = Counter()
        self.seen: set[str] = set()
        self.total = 0
        self.finished = 0
        self.started = time.monotonic()
        self.file_started = self.started

    def __enter__(self) -> LiveProgress:
        self.status = console.status(f"{safe(self.label)}: starting the tests")
        self.status.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.status.__exit__(*exc)

    def __call__(self, event: dict) -> None:
        kind = event["kind"]
        if kind == "collected":
            self.per_file = Counter(n.split("::")[0] for n in event["nodeids"])
            self.total = len(event["nodeids"])
            self.file_started = time.monotonic()
        elif kind == "start":
            name = event["nodeid"].split("::", 1)[-1]
            self.status.update(
                f"{safe(self.label)}: test {self.finished + 1} of {self.total or '?'}: {safe(name)}"
            )
        elif kind == "test" and event["nodeid"] not in self.seen:
            self.seen.add(event["nodeid"])
            self.finished += 1
            file = event["nodeid"].split("::")[0]
            self.done[file] += 1
            if event["outcome"] in ("failed", "error"):
                self.bad[file] += 1
            if self.done[file] == self.per_file.get(file):
                self._file_line(file)
        elif kind == "error":
            console.print(f"  {safe(PurePosixPath(event['nodeid']).name)}  could not be imported")

    def _file_line(self, file: str) -> None:
        now = time.monotonic()
        bad = self.bad[file]
        counts = f"{self.done[file] - bad} passed" + (f", {bad} failed" if bad else "")
        style = "bad" if bad else "note"
        console.print(
            f"  {safe(PurePosixPath(file).name)}  [{style}]{counts}[/{style}]  "
            f"[note]{now - self.file_started:.1f} s[/note]"
        )
        self.file_started = now


def show_run(run: TestRun, label: str) -> None:
    """The failing tests, grouped by where they failed, then one summary line (ok, or error:
    on stderr with a hint)."""
    summary = f"{run.passed} passed, {run.failed} failed"
    if run.skipped:
        summary += f", {run.skipped} skipped"
    if run.ok:
        ok(f"{label}: {summary} in {run.seconds:.0f} s")
        return
    groups: dict[tuple, list[Failure]] = {}
    for failure in run.failures:
        kind = failure.message.split(":")[0]
        # the two innermost places identify a cause; callers further out vary with the test
        groups.setdefault((kind, tuple(failure.places[:2])), []).append(failure)
    for failures in list(groups.values())[:SHOWN_GROUPS]:
        first, *others = failures
        if first.test.endswith(".py") and len(failures) > 1:  # one import error, many files
            others = []
        console.print(f"[bad]FAILED[/bad] {safe(first.test)}", soft_wrap=True)
        for line in first.message.splitlines():
            console.print(f"    {line}", markup=False, soft_wrap=True)
        for number, place in enumerate(first.places):
            console.print(f"    {'from' if number else 'at'} {place}", markup=False, soft_wrap=True)
        if others:
            console.print(f"  and {len(others)} more failing the same way:")
            for other in others[:SHOWN_NAMES]:
                console.print(f"[bad]FAILED[/bad] {safe(other.test)}", soft_wrap=True)
            if len(others) > SHOWN_NAMES:
                console.print(f"  ... {len(others) - SHOWN_NAMES} more")
    if len(groups) > SHOWN_GROUPS:
        more = len(groups) - SHOWN_GROUPS
        console.print(f"... and {more} more kinds of failure; fix these first")
    if any(_missing_name(f) for f in run.failures):
        console.print(
            "[note]note: a name the tests or the course's code use is missing from your package: "
            "renamed, or a cell lost its `#| export` line?[/note]",
            soft_wrap=True,
        )
    if not run.failures and not run.timed_out and run.output:
        console.print(run.output, markup=False)  # pytest could not run: its own words
    if run.timed_out:
        fail(
            f"{label}: timed out: the tests ran past the {run.limit:g} s limit and were "
            f"stopped, still running {run.timed_out}",
            hint=f"an endless loop? Fix it; or allow more time: --timeout SECONDS or {TIMEOUT_ENV}",
        )
    else:
        fail(f"{label}: {summary}")


def _missing_name(failure) -> bool:
    """An import of the package failed for want of a name (a test file that could not be
    imported: the package's own code, or the test, asked for a name no cell defines)."""
    collected = failure.test.endswith(".py")
    return "cannot import name" in failure.message or (
        collected and failure.message.startswith("NameError")
    )
