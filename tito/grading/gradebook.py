"""What a course's grades are: nbgrader's gradebook merged with tito's record of every
autograde attempt, so that every student who submitted appears, with a reason when ungradable.

nbgrader only stores the submissions it managed to grade. A notebook that is not JSON, sits
under the wrong name or fails before grading never reaches the gradebook, so `tito grade
autograde` writes one small JSON file per student and module under <course>/tito/outcomes/.
One file per student keeps graders on several machines (a shared course folder, --shard)
from overwriting each other's records.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from tito.curriculum import paths
from tito.curriculum.catalog import MODULES, CourseModule
from tito.errors import TitoError
from tito.grading import course as layout
from tito.grading import similarity
from tito.inert import csv_row

GRADED = "graded"
MANUAL = "needs manual grading"
UNGRADABLE = "ungradable"
NOT_GRADED = "not autograded yet"
MISSING = "no submission"

CSV_COLUMNS = [  # nbgrader's CSV export, then tito's three
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
    "status",
    "reason",
    "similarity",  # the highest code match and with whom (tito/grading/similarity.py)
]


# --- the record of autograde attempts ---------------------------------------------------------


def outcomes_dir(course: Path, module: CourseModule) -> Path:
    return layout.outcomes_dir(course, module)


def record_outcomes(course: Path, module: CourseModule, outcomes: list) -> None:
    """Keep the latest autograde attempt of each student (grading.Outcome or any dataclass
    with student, ok and message)."""
    folder = outcomes_dir(course.resolve(), module)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for outcome in outcomes:
        record = {**asdict(outcome), "time": when}
        paths.write_atomic(
            folder / _outcome_file(outcome.student), json.dumps(record, indent=1, default=str)
        )


def _outcome_file(student: str) -> str:
    """The record's file name: the student's name, or, when that would not fit a file name
    (255 bytes), its digest; the record itself holds the name."""
    if len(student.encode()) <= 200:
        return f"{student}.json"
    return f"long-name-{hashlib.sha256(student.encode()).hexdigest()}.json"


def read_outcomes(course: Path, module: CourseModule) -> dict[str, dict]:
    """student -> their latest recorded attempt; unreadable records are skipped."""
    found = {}
    for path in sorted(outcomes_dir(course, module).glob("*.json")):
        try:
            record = json.loads(path.read_text())
            found[record["student"]] = record
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


# --- one module's grades ------------------------------------------------------------------------


@dataclass
class Entry:
    """One student's standing on one module."""

    status: str
    reason: str = ""
    cells: dict[str, float] = field(default_factory=dict)  # grade_id -> points (0 unscored)
    score: float = 0.0  # nbgrader's total, manual grades included
    penalty: float = 0.0
    timestamp: object = None


@dataclass
class Scores:
    cells: list[tuple[str, float]]  # (grade_id, max points) of each graded cell, in order
    entries: dict[str, Entry]  # every student who submitted, by name

    @property
    def rows(self) -> dict[str, dict[str, float]]:
        """student -> grade_id -> points, for every student (0 where nothing was scored)."""
        return {
            student: {grade_id: entry.cells.get(grade_id, 0.0) for grade_id, _ in self.cells}
            for student, entry in self.entries.items()
        }

    def total(self, student: str) -> float:
        return self.entries[student].score

    def status(self, student: str) -> str:
        return self.entries[student].status

    @property
    def max_total(self) -> float:
        return sum(points for _, points in self.cells)


def open_gradebook(course: Path) -> Gradebook:
    """The course's gradebook at nbgrader's CourseDirectory.db_url (a file or a server)."""
    api = layout.nbgrader_api(course.resolve())
    url = api.coursedir.db_url
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
        raise TitoError(
            f"no gradebook in {course}",
            hint="run `tito grade generate N` and `tito grade autograde N` first",
        )
    return api.gradebook


def _entries(gb: Gradebook, course: Path, module: CourseModule) -> dict[str, Entry]:
    name, nb_id = layout.assignment_id(module), module.slug
    entries = {}
    for submission in gb.assignment_submissions(name):
        student = submission.student.id
        try:
            graded = gb.find_submission_notebook(nb_id, name, student)
        except MissingEntry:
            entries[student] = Entry(UNGRADABLE, f"no {nb_id}.ipynb in the graded submission")
            continue
        entry = Entry(
            GRADED,
            cells={g.name: float(g.score) for g in graded.grades},
            score=float(submission.score),
            penalty=float(submission.late_submission_penalty or 0),
            timestamp=submission.timestamp,
        )
        unscored = sorted(g.name for g in graded.grades if g.needs_manual_grade)
        if graded.needs_manual_grade:
            entry.status = MANUAL
            entry.reason = (
                f"no automatic score for {', '.join(unscored)} (test cell deleted or changed?)"
                if unscored
                else "nbgrader flagged it for manual grading"
            )
        entries[student] = entry
    # the latest attempt wins: a submission that failed to grade now scores 0, with its reason
    for student, record in read_outcomes(course, module).items():
        if record.get("ok") and student in entries and record.get("lost"):
            entries[student].reason = "; ".join(str(line) for line in record["lost"])[:2000]
        if record.get("ok") and student in entries and record.get("manual"):
            entry = entries[student]  # a refused cell: scored, and a person should look
            entry.status = MANUAL
            entry.reason = "; ".join(filter(None, [str(record["manual"]), entry.reason]))[:2000]
        if not record.get("ok"):
            reason = record.get("message") or "could not be graded"
            # paths inside the course read shorter from it: submitted/ada/01_tensor/...
            entries[student] = Entry(UNGRADABLE, reason.replace(f"{course}{os.sep}", ""))
    for student in layout.students_in(course, layout.SUBMITTED, module):
        entries.setdefault(
            student, Entry(NOT_GRADED, f"run `tito grade autograde {module.number}`")
        )
    return dict(sorted(entries.items()))


def scores(course: Path, module: CourseModule) -> Scores:
    """Every submitter's points per graded cell and status, from the gradebook and the record."""
    course = course.resolve()
    name = layout.assignment_id(module)
    with open_gradebook(course) as gb:
        try:
            assignment = gb.find_assignment(name)
        except MissingEntry:
            raise TitoError(
                f"the gradebook has no {name}",
                hint=f"run `tito grade generate {module.number}` first",
            ) from None
        cells = [
            (c.name, float(c.max_score))
            for nb in assignment.notebooks
            if nb.name == module.slug
            for c in nb.grade_cells
        ]
        entries = _entries(gb, course, module)
    order = {grade_id: i for i, grade_id in enumerate(_grade_ids(course, module))}
    cells.sort(key=lambda c: order.get(c[0], len(order)))
    return Scores(cells=cells, entries=entries)


def _grade_ids(course: Path, module: CourseModule) -> list[str]:
    """Graded cells in notebook order (the gradebook does not keep the order)."""
    nb = nbformat.read(layout.notebook_path(course, layout.SOURCE, module), as_version=4)
    return [
        cell.metadata["nbgrader"]["grade_id"]
        for cell in nb.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
    ]


# --- the whole course ---------------------------------------------------------------------------


def export_csv(course: Path, to: Path | None = None) -> Path:
    """nbgrader's CSV export (every released module x every student) with a status and a reason
    per row; students nbgrader never graded are in it too, with 0."""
    course = course.resolve()
    dest = (to or course / "grades.csv").resolve()
    by_name = {layout.assignment_id(m): m for m in MODULES}
    rows = []
    with open_gradebook(course) as gb:
        assignments = sorted(gb.assignments, key=lambda a: a.name)
        known = {s.id: s for s in gb.students}
        per_module = {
            a.name: _entries(gb, course, by_name[a.name]) for a in assignments if a.name in by_name
        }
        everyone = sorted(set(known).union(*map(set, per_module.values())))
        for assignment in assignments:
            entries = per_module.get(assignment.name, {})
            for student in everyone:
                entry = entries.get(student, Entry(MISSING))
                person = known.get(student)
                raw = entry.score if entry.status in (GRADED, MANUAL) else 0.0
                rows.append(
                    {
                        "assignment": assignment.name,
                        "duedate": assignment.duedate or "",
                        "timestamp": entry.timestamp or "",
                        "student_id": student,
                        "last_name": (person.last_name if person else None) or "",
                        "first_name": (person.first_name if person else None) or "",
                        "email": (person.email if person else None) or "",
                        "raw_score": raw,
                        "late_submission_penalty": entry.penalty,
                        "score": max(0.0, raw - entry.penalty),
                        "max_score": float(assignment.max_score),
                        "status": entry.status,
                        "reason": entry.reason,
                        "similarity": similarity.csv_value(course, assignment.name, student),
                    }
                )
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    writer.writerows(csv_row(row) for row in rows)  # no cell a spreadsheet runs
    paths.write_atomic(dest, text.getvalue())  # a crash never leaves half a grades file
    return dest
