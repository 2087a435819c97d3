"""The one place a verdict is decided: a check's numbers and how its process ended become points
and a reason.

A graded check runs in a sandboxed process (tito/sandbox/check_runner.py) that writes lines
marked with the check's nonce: where its own code begins, the numbers its probes returned, a
pass or fail line, and how the process ended. Those lines only explain. What decides is the
judge (tito/grading/judge.py): the probe's numbers against the reference's on the same seed.

    process lines -> Ending (read_ending)        what the process said and how it ended
    judge result  -> decide(...)                 passed or not, and the reason
    isolated run  -> alone(...)                  the declared cells alone (scoring.isolate)
    Verdict       -> points, cell outputs        what nbgrader records (InjectVerdicts)

nbgrader gives an autograded test cell its full points when the cell has no error output and 0
when it has one; `cell_outputs` writes the error output exactly when the verdict says failed, so
nbgrader's own grading agrees with this file by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENDINGS = {
    "signal 9": "killed (SIGKILL: out of memory, or too many processes)",
    "signal 24": "CPU time limit exceeded",
    "signal 25": "output limit exceeded",
    "signal 11": "crashed (segmentation fault)",
    "output": "output limit exceeded (1 MiB)",
}

TAMPERING = "the submission wrote a verdict line of its own (tampering)"
NO_NUMBERS = "no numbers came back"


@dataclass
class Ending:
    """What one check's process said about itself (trusted for nothing but explanations)."""

    verdicts: list[str] = field(default_factory=list)  # "pass" or "fail <reason>" lines
    ended: str | None = None  # "status 0", "signal 9", "timeout 30", ... (None: never ended)
    notes: list[str] = field(default_factory=list)  # "<cell>: <error>" of the cells before it
    output: str = ""  # what the check's own code printed


def read_ending(output: str, nonce: str) -> Ending:
    """The lines of `output` marked with `nonce` (one check's process); other lines are the
    check's printed output when they stand between its begin and verdict lines."""
    lines = output.splitlines()
    marks = [i for i, line in enumerate(lines) if line.startswith(nonce + " ")]
    words = {i: lines[i][len(nonce) + 1 :] for i in marks}
    begin = next((i for i in marks if words[i] == "begin"), None)
    verdicts = [i for i in marks if words[i] == "pass" or words[i].startswith("fail ")]
    ending = Ending([words[i] for i in verdicts])
    ending.ended = next(
        (words[i][len("ended ") :] for i in marks if words[i].startswith("ended ")), None
    )
    ending.notes = [words[i][len("note ") :] for i in marks if words[i].startswith("note ")]
    if begin is not None:
        stop = verdicts[-1] if verdicts else len(lines)
        shown = lines[begin + 1 : stop]
        ending.output = "\n".join(line for line in shown if not line.startswith(nonce)).strip()
    return ending


def process_reason(ending: Ending, timeout: float) -> str:
    """ "" when the process says the check passed and ended cleanly, else why not, one line.
    The runner writes exactly one verdict, then exits with status 0; a second verdict line
    means the submission found the nonce and printed one of its own: never a pass."""
    last = ending.verdicts[-1] if ending.verdicts else None
    if len(ending.verdicts) > 1:
        return TAMPERING
    if last == "pass" and ending.ended == "status 0":
        return ""
    if last == "pass":
        return f"the check passed, but its process then ended with {ending.ended}"
    if last is not None:
        reason = last[len("fail ") :]
        if ending.notes and reason.startswith(("NameError", "ImportError", "ModuleNotFoundError")):
            reason += f" (cell {ending.notes[0]})"
        return reason
    if ending.ended is None:
        return "the grading process ended before this check ran"
    if ending.ended.startswith("timeout"):
        place = ending.ended.partition(" in ")[2]  # where its time ran out, when the runner knows
        where = f" in {place}" if place else ""
        return f"timeout: stopped after {timeout:g} s{where} and killed (it ignored the stop)"
    return f"{ENDINGS.get(ending.ended, f'ended with {ending.ended}')}, before the check finished"


@dataclass
class Verdict:
    passed: bool
    reason: str  # "" when passed
    points: float  # what the check awards: all of its points or none


def decide(points: float, judged: str, numbers_problem: str, reference_problem: str,
           said: str, stopped: str = "") -> Verdict:  # fmt: skip
    """The verdict of one check over the student's code. `judged` is the judge's comparison
    ("" when the numbers match); `numbers_problem` why the student's run gave no usable numbers
    ("" when it did); `reference_problem` the same for the reference; `said` the process's own
    reason (process_reason); `stopped` how the whole sandbox was stopped, if it was. Only the
    numbers decide; what the process said only explains."""
    why = judged
    if numbers_problem == NO_NUMBERS and not reference_problem and said:
        why = said  # the cell itself raised, or the process died: say so
    elif why and not numbers_problem and said == TAMPERING:
        why = said
    if stopped and why and not why.startswith("timeout"):
        why = f"{stopped}: the grading process was stopped"
    return Verdict(not why, why, 0.0 if why else float(points))


def hit_limit(reason: str) -> bool:
    """Whether a failed check's process ran into a limit (time, memory, output, a stopped
    sandbox). Such a check is not run again alone: a second run would double what one
    submission can cost the class's grading."""
    limits = ("timeout", "out of memory", *ENDINGS.values())
    return reason.startswith(limits) or reason.endswith("the grading process was stopped")


def alone(verdict: Verdict, points: float, judged_alone: str | None) -> Verdict:
    """The verdict once the check ran again with the reference in every solution cell it does
    not declare (`judged_alone`: the judge's comparison of that run; None when it did not run).
    It passes when the declared cells alone match; it keeps the student's own reason when not
    (the isolated run's output and reason are never shown: the reference's code ran in it)."""
    if verdict.passed or judged_alone is None or judged_alone:
        return verdict
    return Verdict(True, "", float(points))


def blame(reason: str, measures: str) -> str:
    """A lost check's reason as the student reads it: the function(s) it measures first (and
    not again where the reason says where its time ran out)."""
    if not reason or not measures or reason.startswith(measures):
        return reason
    if reason.startswith("timeout"):
        reason = reason.replace(f" in {measures}", "", 1)
    return f"{measures}: {reason}"


def cell_outputs(passed: bool, reason: str) -> tuple[str, str] | None:
    """The error output (ename, evalue) a graded cell carries into nbgrader, which scores a
    test cell 0 exactly when it has one; None when the check passed."""
    if passed:
        return None
    name = reason.split(":")[0] if ":" in reason else "NotPassed"
    return (name if name.isidentifier() else "NotPassed", reason)
