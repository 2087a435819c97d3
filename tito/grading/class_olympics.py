"""The class's Torch Olympics: every student's submitted run measured the same way, one at a time,
into a leaderboard table of the course's gradebook database.

A student submits, inside their module 20 folder, `run/` as `tito milestone run gpt` wrote it
(`checkpoint.npz`) with an `olympics.json` manifest. No student code runs: a submission is
weights (an .npz read without pickle) and a manifest; the transformations it names and the
measurements are the instructor's package's code. The run must have been trained on the default
corpus and stay within bounds (milestones.runs.check_untrusted). Everyone is measured against one
baseline, the instructor's run given with --baseline (for quality: the default settings trained
under the same budget), on the same machine, one submission after another so none share cores.
Every entry also takes the memorisation test (milestones/memorisation.py); on the instructor's own
held-out text, which no student has, it costs one more scoring pass and flags no honest entry.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from tito.curriculum import paths
from tito.curriculum.catalog import find
from tito.errors import TitoError
from tito.grading.course import check_student_name
from tito.inert import csv_row, terminal_text

RUN_FOLDER = "run"  # inside submitted/<student>/20_capstone/
MANIFEST_BYTES = 64 * 1024
TABLE = "tito_olympics"
COLUMNS = ("student", "event", "score", "tokens_per_second", "bytes", "bits_per_char",
           "train_cpu_seconds", "violation", "checkpoint_sha256", "measured_at")  # fmt: skip


@dataclass
class Result:
    student: str
    record: dict | None = None  # run_event's record, or None with a reason
    reason: str = ""


def _table(metadata):
    from sqlalchemy import Column, Float, Integer, String, Table, Text

    return Table(
        TABLE,
        metadata,
        Column("student", String(128), primary_key=True),
        Column("event", String(32), primary_key=True),
        Column("score", Float, nullable=False),
        Column("tokens_per_second", Float),
        Column("bytes", Integer),
        Column("bits_per_char", Float),
        Column("train_cpu_seconds", Float),
        Column("violation", Text),
        Column("checkpoint_sha256", String(64)),
        Column("measured_at", String(32)),
    )


def _engine(course: Path):
    from tito.grading.gradebook import open_gradebook

    with open_gradebook(course) as gb:
        return gb.engine


def submissions(course: Path) -> dict[str, Path]:
    """student -> their submitted run folder (whether or not it is valid)."""
    module = find("20")
    root = course / "submitted"
    found = {}
    for student in sorted(p.name for p in root.iterdir()) if root.is_dir() else []:
        folder = root / student / module.name
        if folder.is_dir():
            found[student] = folder
    return found


def _check(folder: Path) -> Path:
    from tito.grading.submissions import check_folder

    check_folder(folder, folder.name)
    run = folder / RUN_FOLDER
    if not (run / "checkpoint.npz").is_file():
        raise TitoError(f"no {RUN_FOLDER}/checkpoint.npz in the submission")
    manifest = run / "olympics.json"
    if manifest.is_file() and manifest.stat().st_size > MANIFEST_BYTES:
        raise TitoError(f"olympics.json is larger than {MANIFEST_BYTES // 1024} KB")
    return run


def measure_class(course: Path, event: str, baseline_run: Path, repeats: int = 5,
                  budget: float = 60.0, data_dir: Path | None = None,
                  heldout: Path | None = None) -> list[Result]:  # fmt: skip
    """Measure every submission in `event` against one baseline; store and return the results.
    `heldout`, the instructor's own text file, is what quality is measured on (text no student
    has, so no entry can have trained on it); without it, the default held-out text."""
    from milestones import MilestoneError
    from milestones import olympics as contest
    from tinytorch.olympics.events import event as rules_of

    rules = rules_of(event)
    try:
        text = contest.read_heldout(heldout) if heldout is not None else None
    except MilestoneError as err:
        raise TitoError(f"--heldout: {err.message}", hint=err.hint) from None
    try:
        if rules.trained_within_budget:
            baseline = None  # trained once below, with the defaults, then reused
        else:
            baseline = contest.measure(baseline_run, [], data_dir, repeats, heldout=text)
    except MilestoneError as err:
        raise TitoError(f"the baseline run {baseline_run}: {err.message}", hint=err.hint) from None
    results = []
    for student, folder in submissions(course).items():
        try:
            check_student_name(student)  # a name the board's table cannot hold stops no one
            run = _check(folder)
            record = contest.run_event(event, run, data_dir, repeats, budget, baseline,
                                       untrusted=True, heldout=text)  # fmt: skip
        except (TitoError, MilestoneError) as err:
            results.append(Result(student, reason=str(getattr(err, "message", err))))
            continue
        except Exception as err:  # noqa: BLE001 - a malformed file stops this one, not the class
            results.append(Result(student, reason=f"unreadable run ({type(err).__name__}: {err})"))
            continue
        if baseline is None:
            from tinytorch.olympics.events import Measured

            baseline = Measured(**record["baseline"])
        results.append(Result(student, record))
    store(course, event, results)
    return results


def store(course: Path, event: str, results: list[Result]) -> None:
    """Replace the event's rows of the students measured now (an invalid one scores 0)."""
    from sqlalchemy import MetaData, delete, insert

    engine = _engine(course)
    table = _table(MetaData())
    table.create(engine, checkfirst=True)
    rows = []
    for r in results:
        try:
            check_student_name(r.student)
        except TitoError:
            continue  # measured as not measurable, with its reason; there is no row for it
        m = r.record["measured"] if r.record else {}
        rows.append({
            "student": r.student, "event": event,
            "score": r.record["score"] if r.record else 0.0,
            "tokens_per_second": m.get("tokens_per_second"), "bytes": m.get("bytes"),
            "bits_per_char": m.get("bits_per_char"),
            "train_cpu_seconds": m.get("train_cpu_seconds"),
            "violation": (r.record["violation"] if r.record else r.reason) or None,
            "checkpoint_sha256": r.record["checkpoint_sha256"] if r.record else None,
            "measured_at": r.record["when"] if r.record else None,
        })  # fmt: skip
    with engine.begin() as connection:
        students = [row["student"] for row in rows]
        if students:
            connection.execute(
                delete(table).where(table.c.event == event, table.c.student.in_(students))
            )
            connection.execute(insert(table), rows)


def board(course: Path) -> dict[str, list[dict]]:
    """The stored leaderboard: event -> rows, best score first (ties by student id)."""
    from sqlalchemy import MetaData, inspect, select

    engine = _engine(course)
    if TABLE not in inspect(engine).get_table_names():
        return {}
    table = _table(MetaData())
    with engine.connect() as connection:
        rows = [dict(r._mapping) for r in connection.execute(select(table))]
    events: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (-r["score"], r["student"])):
        events.setdefault(row["event"], []).append(row)
    return events


def export_csv(course: Path, to: Path) -> Path:
    """The leaderboard as CSV, one row per student and event, no cell a spreadsheet runs."""
    rows = [row for rows in board(course).values() for row in rows]
    to.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(csv_row(row) for row in rows)
    paths.write_atomic(to, buffer.getvalue())
    return to


def shown(text) -> str:
    return terminal_text(str(text)) if text is not None else ""
