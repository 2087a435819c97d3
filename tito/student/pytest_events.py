"""A pytest plugin that reports each test to tito as one JSON line, while the tests run.

tito's runner loads it into the pytest subprocess (`-p tito.student.pytest_events`) and reads the
file
named by TITO_EVENTS as it grows: that gives live progress, real counts, and for each failure the
test, its first message and the frames of the traceback, without parsing pytest's text output.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import signal

import pytest

MESSAGE_CHARS = 300  # a failure message is shown in one or two lines, never a 10 MB repr
FRAME = re.compile(r"^(\S+\.py):(\d+): ", re.MULTILINE)

_stream = None
_dump = None
_started_in = ""  # pytest's invocation folder: the paths of its text are relative to it


def _emit(**event) -> None:
    if _stream is not None:
        _stream.write(json.dumps(event) + "\n")
        _stream.flush()


def _first_lines(text: str, count: int = 2) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "\n".join(line[:MESSAGE_CHARS] for line in lines[:count])


def pytest_configure(config) -> None:
    global _stream, _dump, _started_in
    _started_in = str(config.invocation_params.dir)
    path = os.environ.get("TITO_EVENTS")
    if path and _stream is None:
        _stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the session
        # On a timeout tito sends SIGUSR1 first: the stack then says where the code was stuck.
        if hasattr(signal, "SIGUSR1"):
            _dump = open(path + ".stack", "w", encoding="utf-8")  # noqa: SIM115
            faulthandler.register(signal.SIGUSR1, file=_dump, all_threads=False)


def pytest_collection_finish(session) -> None:
    _emit(kind="collected", nodeids=[item.nodeid for item in session.items])


def pytest_collectreport(report) -> None:
    if report.failed:
        text = str(report.longrepr)
        errors = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
        message = _first_lines("\n".join(errors) or text)
        # an import error's text names files relative to where pytest started (the staged
        # package's folder, in `complete`): made absolute, so tito can tell whose file it is
        frames = [
            [os.path.join(_started_in, path), int(line)] for path, line in FRAME.findall(text)
        ]
        _emit(kind="error", nodeid=report.nodeid, message=message, frames=frames)


def pytest_runtest_logstart(nodeid, location) -> None:
    _emit(kind="start", nodeid=nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and call.excinfo is not None:
        info = call.excinfo
        text = str(info.value) if str(info.value).strip() else ""
        message = f"{info.typename}: {_first_lines(text)}" if text else info.typename
        frames = [[str(entry.path), entry.lineno + 1] for entry in info.traceback]
        where = getattr(info.value, "tito_where", None)  # (file, line) the test blames, innermost
        if isinstance(where, tuple) and len(where) == 2:
            frames.append([str(where[0]), int(where[1])])
        note = getattr(info.value, "tito_note", None)  # one line the test adds (a graded check)
        if isinstance(note, str) and note:
            message += "".join("\n" + line[:MESSAGE_CHARS] for line in note.splitlines()[:2])
        report.tito_failure = {"message": message, "frames": frames}
        places = getattr(info.value, "tito_places", None)  # notebook places the test resolved
        if isinstance(places, list) and places:
            report.tito_failure["places"] = [str(p)[:MESSAGE_CHARS] for p in places[:3]]
    return report


def pytest_runtest_logreport(report) -> None:
    failure = getattr(report, "tito_failure", None)
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if report.when != "call" and outcome == "failed":
            outcome = "error"  # a fixture (setup or teardown) failed, not the test body
        event = {"kind": "test", "nodeid": report.nodeid, "outcome": outcome}
        if failure is not None:
            event.update(failure)
        elif report.failed:
            event.update(message=_first_lines(str(report.longrepr)), frames=[])
        _emit(**event)


def pytest_unconfigure(config) -> None:
    global _stream, _dump
    if _dump is not None:
        faulthandler.unregister(signal.SIGUSR1)
        _dump.close()
        _dump = None
    if _stream is not None:
        _stream.close()
        _stream = None
