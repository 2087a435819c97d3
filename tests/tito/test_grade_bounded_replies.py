"""Everything tito reads back from a sandbox is bounded before it is parsed: a reply with a
huge declared shape, too many arrays, JSON nested a hundred thousand deep or a malformed
record makes that one submission ungradable (its checks score 0 with a reason) and never stops
the run; a crafted trace costs only its own feedback page its diagnosis. A notebook of 50,000
cells is refused at once."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pytest

from tito.curriculum.catalog import find
from tito.errors import TitoError
from tito.grading import course, gradebook, judge
from tito.grading import nbgrader as grading
from tito.grading.submissions import parse_notebook
from tito.sandbox import limits, npzwire
from tito.student import diagnose

MODULE = find(1)
NOTEBOOK = grading.notebook_file(MODULE)


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _npy(array: np.ndarray, shape: tuple | None = None) -> bytes:
    """A .npy of `array`'s bytes whose header declares `shape` (default: its own)."""
    header = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
              "shape": shape if shape is not None else array.shape}  # fmt: skip
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + array.tobytes()


def _record(text: bytes) -> bytes:
    return _npy(np.frombuffer(text, np.uint8))


def unpack(data: bytes):
    return npzwire.unpack(data, limits.TRACE_BYTES, max_arrays=limits.WIRE_ARRAYS,
                          max_depth=limits.WIRE_DEPTH)  # fmt: skip


DEEP = b"[" * 100_000 + b"]" * 100_000
CRAFTED = {  # what a submission that learnt its nonce could send instead of its numbers
    "huge": _zip({"record.npy": _record(b'{"probes": []}'),
                  "p0_y.npy": _npy(np.zeros(4), (10**6, 10**6, 10**6))}),  # fmt: skip
    "deep": _zip({"record.npy": _record(b'{"probes": ' + DEEP + b"}")}),
    "many": _zip({"record.npy": _record(b'{"probes": []}'),
                  **{f"a{i}.npy": _npy(np.zeros(0)) for i in range(limits.WIRE_ARRAYS + 1)}}),
    "keys": npzwire.pack({}, {"probes": [{"keys": 5, "error": None}]}),
}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("huge", "declares shape"),
        ("deep", "nests deeper than"),
        ("many", "more than the 20000 allowed"),
    ],
)
def test_an_oversized_reply_is_refused_before_anything_is_allocated(kind, why):
    started = time.perf_counter()
    with pytest.raises(npzwire.WireError, match=why):
        unpack(CRAFTED[kind])
    assert time.perf_counter() - started < 5


def test_nesting_within_json_s_own_limit_is_still_bounded():
    data = _zip({"record.npy": _record(b'{"probes": ' + b"[" * 40 + b"]" * 40 + b"}")})
    with pytest.raises(npzwire.WireError, match="nests deeper than 32"):
        unpack(data)


def test_a_malformed_probe_record_is_a_reason_not_a_crash():
    mine = judge.read_numbers([CRAFTED["keys"]])
    assert mine.problem == "unreadable numbers: a probe's record is malformed"
    reference = judge.read_numbers([npzwire.pack({}, {"probes": [{"keys": [], "error": ""}]})])
    assert judge.judge(mine, reference) == mine.problem


TRACES = {  # a crafted trace: each is a WireError, read as one line
    "no checks": {"setup": []},
    "events not a list": {"setup": [], "checks": [{"label": "t", "events": 3, "results": {}}]},
    "an event without op": {"setup": [], "checks": [
        {"label": "t", "events": [{"kind": "forward"}], "results": {}, "where": []}]},
    "a result nowhere": {"setup": [], "checks": [
        {"label": "t", "events": [], "results": {"y": 7}, "where": []}]},
    "too many events": {"setup": [], "checks": [{"label": "t", "results": {}, "where": [],
        "events": [{"kind": "layer", "op": "L"}] * (limits.TRACE_EVENTS + 1)}]},
    "a place that is no place": {"setup": [], "checks": [
        {"label": "t", "events": [], "results": {}, "where": [["c", "x", 3]]}]},
}  # fmt: skip


@pytest.mark.parametrize("name", list(TRACES))
def test_a_crafted_trace_is_one_clear_line(name):
    with pytest.raises(TitoError, match="no usable trace"):
        diagnose.read_trace(npzwire.pack({}, TRACES[name]), limits.TRACE_BYTES)
    with pytest.raises(TitoError, match="no usable trace"):
        diagnose.read_trace(CRAFTED["deep"], limits.TRACE_BYTES)


def test_a_50000_cell_notebook_is_refused_at_once():
    # a valid notebook, written as JSON directly: nbformat validates each of 50,000 new cells
    # and the whole notebook again on writing (most of a minute on a busy machine)
    nb, cell = nbformat.v4.new_notebook(), nbformat.v4.new_code_cell("x")
    nb.cells = [{**cell, "id": f"cell-{i}", "source": f"x{i} = {i}"} for i in range(50_000)]
    data = json.dumps(nb).encode()
    started = time.perf_counter()
    with pytest.raises(TitoError, match="50000 cells; a submission may have at most 2000"):
        parse_notebook(data, NOTEBOOK)
    assert time.perf_counter() - started < 3


# --- a class: the crafted replies stop nothing --------------------------------------------


HONEST = ["ada", "zoe"]  # one sorted before the attackers, one after


@pytest.fixture(scope="module")
def klass(tmp_path_factory, released) -> Path:
    folder = released(tmp_path_factory.mktemp("bounded") / "course", MODULE.number, 10)
    source = nbformat.read(folder / "source" / MODULE.name / NOTEBOOK, 4)
    for student in [*HONEST, *(f"m-{kind}" for kind in CRAFTED)]:
        nb = nbformat.reads(nbformat.writes(source), as_version=4)
        if student.startswith("m-"):  # the marker the crafted reply is sent for
            cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
            cell.source = f'print("CRAFTED-{student[2:]}")\n' + cell.source
        path = course.notebook_path(folder, course.SUBMITTED, MODULE, student)
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    return folder


@pytest.fixture
def crafted_replies(monkeypatch):
    """A submission's run sends the crafted bytes instead of what the runner wrote."""
    honest = npzwire.from_lines

    def from_lines(output: str, nonce: str, word: str) -> list[bytes]:
        for kind, data in CRAFTED.items():
            if f"CRAFTED-{kind}" in output:
                return [data] if word == "numbers" else [CRAFTED["deep"]]
        return honest(output, nonce, word)

    monkeypatch.setattr(npzwire, "from_lines", from_lines)


def test_crafted_replies_cost_only_their_own_submission(klass: Path, crafted_replies):
    with course.nbgrader_options([]):
        outcomes = {o.student: o for o in grading.autograde(klass, MODULE, jobs=2)}
        scores = gradebook.scores(klass, MODULE)
    assert set(outcomes) == {*HONEST, *(f"m-{kind}" for kind in CRAFTED)}
    for student in HONEST:
        assert scores.total(student) == scores.max_total == 6, outcomes[student]
    for kind in CRAFTED:  # the crafted reply comes from the first solution cell's runs: that
        outcome = outcomes[f"m-{kind}"]  # cell's check is lost; the others are measured with the
        row = scores.entries[f"m-{kind}"].cells  # reference's cell in its place, and hold
        assert row["test-arithmetic"] == 0 and scores.total(f"m-{kind}") == 4, outcome
        assert "unreadable numbers" in outcome.message, outcome


def test_a_crafted_trace_costs_only_its_own_diagnosis(klass: Path, crafted_replies):
    with course.nbgrader_options([]):
        grading.autograde(klass, MODULE, jobs=2)
        outcomes = grading.feedback(klass, MODULE, diagnose=True)
    assert all(o.ok for o in outcomes), outcomes
    for student in HONEST:
        page = course.feedback_path(klass, MODULE, student).read_text()
        assert "every check has full marks" in page and "No diagnosis" not in page
    page = course.feedback_path(klass, MODULE, "m-deep").read_text()
    assert "No diagnosis: the diagnosis run sent back no usable trace" in page
