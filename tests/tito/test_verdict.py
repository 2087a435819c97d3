"""tito/grading/verdict.py alone turns a check's numbers and its process ending into points and a
reason; scoring and nbgrader's InjectVerdicts only call it."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from tito.grading import scoring, verdict
from tito.grading.nbgrader import InjectVerdicts

NONCE = "n" * 32


def lines(*words: str, printed: str = "") -> str:
    marked = [f"{NONCE} {w}" for w in words]
    if printed and f"{NONCE} begin" in marked:
        at = marked.index(f"{NONCE} begin") + 1
        marked.insert(at, printed)
    return "\n".join(["noise", *marked])


def test_the_process_lines_only_explain():
    ending = verdict.read_ending(lines("begin", "pass", "ended status 0", printed="hi"), NONCE)
    assert ending.output == "hi" and verdict.process_reason(ending, 5) == ""
    died = verdict.read_ending(lines("begin", "pass", "ended signal 9"), NONCE)
    assert "ended with signal 9" in verdict.process_reason(died, 5)
    forged = verdict.read_ending(lines("begin", "pass", "pass", "ended status 0"), NONCE)
    assert verdict.process_reason(forged, 5) == verdict.TAMPERING
    slow = verdict.read_ending(lines("begin", "ended timeout 5"), NONCE)
    assert verdict.process_reason(slow, 5).startswith("timeout: stopped after 5 s")
    missing = verdict.read_ending(
        lines("note 3: NameError: x", "begin", "fail NameError: x"), NONCE
    )
    assert verdict.process_reason(missing, 5) == "NameError: x (cell 3: NameError: x)"


def test_the_numbers_decide_points_and_reason():
    matched = verdict.decide(3, "", "", "", "ValueError: the process said it failed")
    assert matched == verdict.Verdict(True, "", 3.0)
    differs = verdict.decide(3, "'y' differs", "", "", "")
    assert differs == verdict.Verdict(False, "'y' differs", 0.0)
    raised = verdict.decide(3, verdict.NO_NUMBERS, verdict.NO_NUMBERS, "", "ValueError: bad")
    assert raised.reason == "ValueError: bad" and raised.points == 0
    forged = verdict.decide(3, "'y' differs", "", "", verdict.TAMPERING)
    assert forged.reason == verdict.TAMPERING
    stopped = verdict.decide(3, "'y' differs", "", "", "", stopped="killed")
    assert stopped.reason == "killed: the grading process was stopped"


def test_a_check_passes_alone_only_when_its_isolated_run_matched():
    lost = verdict.Verdict(False, "'y' differs", 0.0)
    assert verdict.alone(lost, 2, "") == verdict.Verdict(True, "", 2.0)
    assert verdict.alone(lost, 2, "'z' differs") == lost  # the student's own reason stays
    assert verdict.alone(lost, 2, None) == lost
    assert verdict.blame("'y' differs", "f (cell 'c')") == "f (cell 'c'): 'y' differs"
    assert verdict.blame("", "f (cell 'c')") == ""
    assert verdict.hit_limit("timeout: stopped after 5 s")
    assert verdict.hit_limit("out of memory (MemoryError)")
    assert verdict.hit_limit("killed: the grading process was stopped")
    assert not verdict.hit_limit("'y' differs from the reference in 3 of 4 value(s)")


def test_inject_verdicts_writes_an_error_output_exactly_when_the_verdict_failed():
    cells = [new_code_cell("x", metadata={"nbgrader": {"grade": True, "grade_id": gid}})
             for gid in ("good", "bad")]  # fmt: skip
    nb = new_notebook(cells=cells)
    checks = [scoring.Check("good", 1, passed=True), scoring.Check("bad", 1, reason="f: 'y'")]
    step = InjectVerdicts(scoring.Scored(checks), enabled=True)
    nb, _ = step.preprocess(nbformat.from_dict(nb), {})
    assert [o.output_type for o in nb.cells[0].outputs] == []
    (error,) = nb.cells[1].outputs
    assert error.output_type == "error" and error.evalue == "f: 'y'"
    assert verdict.cell_outputs(False, "f: 'y'") == ("f", "f: 'y'")
    assert verdict.cell_outputs(True, "") is None
