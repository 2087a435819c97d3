"""Whose work is it: how much of each submission's own code for a module it shares with another
submission, with the reference solution, or with an earlier term's submission.

Only the solution cells are compared, and whatever the release already holds (the starter code
around every stub, the given cells) is discounted first, so two honest students who fill the
same stubs share nothing that counts. The fingerprinting is copydetect's (winnowing over
tokens whose names and strings are normalised, so renaming variables or rewording comments
changes nothing); docs/instructor.md says how the thresholds below were chosen.

A pair's score is the larger of the two shares: the part of one submission's own code that is
also in the other. A pair is flagged when that share reaches the threshold with at least LEAST
normalised characters shared, or when the share reaches CLEAR. On a short module the few lines
the lesson all but dictates are a third of an honest submission (module 02: 0.35 of 460
characters, 161 of them shared); the smallest copy measured, one function of four on module
13, shares 0.41 and 215 characters; every honest pair measured on modules 02, 06 and 13 shares
at most 176 characters and at most 0.38 of its code.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from hashlib import blake2b
from pathlib import Path

import nbformat
import numpy as np

from tito.curriculum import paths
from tito.curriculum.catalog import CourseModule
from tito.curriculum.notebooks import read_source, student_notebook
from tito.errors import TitoError
from tito.grading import course as layout
from tito.grading.similarity_report import SHOWN, page  # noqa: F401 (SHOWN: for the CLI)
from tito.grading.submissions import parse_notebook, read_bytes

# The settings, with the defaults measured on tests/tito/similarity_class (docs/instructor.md):
# an instructor changes them in nbgrader_config.py, e.g. `c.TitoSimilarity.threshold = 0.4`.
SETTINGS_SECTION = "TitoSimilarity"
THRESHOLD = 0.35  # a pair is flagged when one side shares at least this share of its own code
NOISE = 30  # shortest run of normalised characters that can count as shared (copydetect's k)
GUARANTEE = 36  # any shared run this long is always found (sets copydetect's winnowing window)
LEAST = 195  # fewest shared normalised characters that flag (honest pairs <= 176, copies >= 215)
CLEAR = 0.6  # ... unless one side shares this much of its own code (honest pairs <= 0.38)
MIN_OWN = 40  # a submission with fewer own normalised characters than this is too short to judge

REFERENCE = "(reference)"
ARCHIVE = "archive:"


@dataclass(frozen=True)
class Settings:
    threshold: float = THRESHOLD
    noise: int = NOISE
    guarantee: int = GUARANTEE
    least: int = LEAST
    clear: float = CLEAR

    def flags(self, pair: Pair) -> bool:
        return pair.score >= self.threshold and (
            pair.shared >= self.least or pair.score >= self.clear
        )

    def describe(self) -> str:
        """What flags a pair, for the terminal and the report."""
        return (
            f"a share of {self.threshold:.2f} with {self.least} shared normalised characters, "
            f"or a share of {self.clear:.2f}"
        )

    def __post_init__(self):
        if not 0 < self.threshold <= 1:
            raise TitoError(f"the similarity threshold must be in (0, 1], got {self.threshold}")
        if not 0 < self.clear <= 1:
            raise TitoError(f"the similarity clear share must be in (0, 1], got {self.clear}")
        if self.least < 0:
            raise TitoError(f"similarity least {self.least} is negative: need 0 or more")
        if not 5 <= self.noise <= self.guarantee:
            raise TitoError(
                f"similarity noise {self.noise} and guarantee {self.guarantee}: need "
                "5 <= noise <= guarantee"
            )


def settings(course: Path | None = None, threshold: float | None = None) -> Settings:
    """The defaults, overridden by the course's nbgrader_config.py, then by `threshold`."""
    values = {}
    if course is not None:
        section = layout.course_config(course).get(SETTINGS_SECTION, {})
        for name, kind in (
            ("threshold", float),
            ("noise", int),
            ("guarantee", int),
            ("least", int),
            ("clear", float),
        ):
            if name in section:
                try:
                    values[name] = kind(section[name])
                except (TypeError, ValueError):
                    raise TitoError(
                        f"c.{SETTINGS_SECTION}.{name} in nbgrader_config.py is "
                        f"{section[name]!r}, not a number",
                        hint=f"set it to a {kind.__name__}, or delete the line for the default",
                    ) from None
    if threshold is not None:
        values["threshold"] = threshold
    return Settings(**values)


@dataclass
class Pair:
    a: str
    b: str
    score: float  # max(share_a, share_b)
    share_a: float  # the part of a's own code found in b
    share_b: float
    shared: int  # normalised characters in the shared runs, on the side with more of them
    slices_a: list[tuple[int, int]] = field(default_factory=list)  # in a's text
    slices_b: list[tuple[int, int]] = field(default_factory=list)

    def other(self, name: str) -> str:
        return self.b if name == self.a else self.a


@dataclass
class Result:
    module: str
    settings: Settings
    texts: dict[str, str]  # name -> the compared code (solution cells)
    pairs: list[Pair]  # every compared pair, highest score first
    too_short: list[str] = field(default_factory=list)  # students with almost no own code

    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if self.settings.flags(p)]

    def best(self) -> dict[str, tuple[float, str, bool]]:
        """Each current student's highest match, with whom, and whether it is flagged (a
        flagged match comes before any higher one that shares too little code to flag)."""
        found: dict[str, tuple[float, str, bool]] = {}
        for pair in self.pairs:
            flag = self.settings.flags(pair)
            for name in (pair.a, pair.b):
                if name == REFERENCE or name.startswith(ARCHIVE):
                    continue
                if name not in found or (flag, pair.score) > (found[name][2], found[name][0]):
                    found[name] = (pair.score, pair.other(name), flag)
        return found


# --- what is compared ---------------------------------------------------------------------------


def _solution_ids(notebook) -> list[str]:
    return [
        cell.metadata["nbgrader"]["grade_id"]
        for cell in notebook.cells
        if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]


# nbgrader's stub (its ClearSolutions.code_stub for Python): what a course's release/ holds
NBGRADER_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")


class Release:
    """What the release of a module already holds: its solution cells as released (starter
    code around each stub; tito's stub and, when the course has one, nbgrader's release) and
    the text of all its code cells."""

    def __init__(self, module: CourseModule, course: Path | None = None):
        notebook = student_notebook(module, paths.source(module))
        self.ids = _solution_ids(notebook)
        self.cells = _cells(notebook, self.ids)
        self.code = "\n\n".join(c.source for c in notebook.cells if c.cell_type == "code")
        self.lines = {line.strip() for line in NBGRADER_STUB}
        released = layout.notebook_path(course, layout.RELEASE, module) if course else None
        if released is not None and released.is_file():
            notebook = _read(released)
            if notebook is not None:
                for code in _cells(notebook, self.ids).values():
                    self.lines.update(line.strip() for line in code.splitlines())

    def own(self, notebook) -> dict[str, str]:
        """grade id -> the lines of that solution cell that the release does not hold."""
        by_id = _cells(notebook, self.ids)
        return {
            grade_id: _added(self.cells[grade_id], by_id.get(grade_id, ""), self.lines)
            for grade_id in self.ids
        }


def _cells(notebook, ids: list[str]) -> dict[str, str]:
    found = {}
    for cell in notebook.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.get("cell_type") == "code" and grade_id in ids:
            found[grade_id] = cell.get("source", "")
    return found


def _added(released: str, written: str, known: set[str] = frozenset()) -> str:
    """The lines of `written` that are not lines of `released` (compared stripped, in order),
    nor one of the `known` released lines."""
    theirs = written.splitlines()
    matcher = difflib.SequenceMatcher(
        None, [x.strip() for x in released.splitlines()], [x.strip() for x in theirs], False
    )
    kept = []
    for tag, _, _, start, end in matcher.get_opcodes():
        if tag in ("insert", "replace"):
            kept += theirs[start:end]
    return "\n".join(line for line in kept if line.strip() and line.strip() not in known)


def _read(path: Path) -> nbformat.NotebookNode | None:
    """A submitted (or archived) notebook read as autograde reads one: a regular file of bounded
    size, cells and nesting (a device, a pipe or a huge file is refused, never read)."""
    try:
        return parse_notebook(read_bytes(path), path.name)
    except TitoError:
        return None  # autograde reports a broken notebook; there is nothing to compare


def submissions(course: Path, module: CourseModule) -> dict[str, Path]:
    """student -> submitted notebook, for every student who submitted this module."""
    return {
        student: layout.notebook_path(course, layout.SUBMITTED, module, student)
        for student in layout.students_in(course, layout.SUBMITTED, module)
    }


def archived(folder: Path, module: CourseModule) -> dict[str, Path]:
    """Earlier terms' notebooks of this module under `folder` (a course folder or any tree)."""
    if not folder.is_dir():
        raise TitoError(f"no folder {folder} to read earlier submissions from")
    if (folder / layout.SUBMITTED).is_dir():  # a course folder: its submissions only
        folder = folder / layout.SUBMITTED
    found = {}
    for path in sorted(folder.rglob(layout.notebook_file(module))):
        if ".ipynb_checkpoints" in path.parts:
            continue
        where = path.parent.relative_to(folder)
        where = where.parent if where.name == layout.assignment_id(module) else where
        found[ARCHIVE + where.as_posix()] = path
    return found


# --- comparing ----------------------------------------------------------------------------------


def _kgram_hashes(code: str, k: int) -> np.ndarray:
    """A hash of every k-gram of `code`, the same in every process.

    copydetect's own `hashed_kgrams` uses Python's `hash()`, which is salted per process
    (PYTHONHASHSEED): winnowing then kept other fingerprints in every run, and scores moved by
    up to 0.08 between two runs on the same notebooks. 48 bits of blake2b are exact as the
    float64 that copydetect's winnowing compares in.
    """
    grams = (code[i : i + k] for i in range(len(code) - k + 1))
    return np.array(
        [
            int.from_bytes(
                blake2b(g.encode("utf-8", "surrogatepass"), digest_size=6).digest(), "big"
            )
            for g in grams
        ],
        dtype=np.int64,
    )


class _Prints:
    """copydetect's fingerprint of one piece of code (what its `compare_files` reads of a
    CodeFingerprint: k, hashes, hash_idx, filtered_code, offsets, token_coverage), made with
    copydetect's tokenizer and winnowing over `_kgram_hashes`, without the k-grams in `discount`.

    The discount is applied here rather than by copydetect's own `boilerplate` argument, which
    intersects with `assume_unique=True` over hashes that repeat and so keeps much of the
    starter code (seen on module 13: given docstrings counted as shared).
    """

    def __init__(self, code: str, setting: Settings, discount: set[int]):
        from copydetect.utils import filter_code, get_token_coverage, winnow

        self.k = setting.noise
        self.filtered_code, self.offsets = filter_code(code, "code.py", "python")
        window = setting.guarantee - setting.noise + 1
        hashes, where = winnow(
            _kgram_hashes(self.filtered_code, self.k), window, remove_duplicates=False
        )
        self.hash_idx: dict[int, list[int]] = {}
        for value, at in zip(hashes.tolist(), where.tolist()):
            if value not in discount:
                self.hash_idx.setdefault(value, []).append(at)
        self.hashes = set(self.hash_idx)
        self.token_coverage = get_token_coverage(self.hash_idx, self.k, len(self.filtered_code))


def _boilerplate(text: str, setting: Settings) -> set[int]:
    """Every k-gram of the release (not only the winnowed ones): all of it is discounted."""
    from copydetect.utils import filter_code

    return set(_kgram_hashes(filter_code(text, "release.py", "python")[0], setting.noise).tolist())


def _slices(array, shift: int) -> list[tuple[int, int]]:
    return [(int(s) + shift, int(e) + shift) for s, e in zip(array[0], array[1])]


class _Submission:
    """One notebook's own code, fingerprinted cell by cell (no run spans two cells)."""

    def __init__(self, cells: dict[str, str], setting: Settings, discount: set[int]):
        self.parts, self.prints, self.starts = [], {}, {}
        at = 0
        for grade_id, code in cells.items():
            head = f"# {grade_id}\n"
            self.starts[grade_id] = at + len(head)
            self.parts.append(head + code + "\n\n")
            at += len(self.parts[-1])
            if code.strip():
                self.prints[grade_id] = _Prints(code, setting, discount)
        self.text = "".join(self.parts)
        self.own = sum(int(p.token_coverage) for p in self.prints.values())


def _pair(a: str, b: str, one: _Submission, two: _Submission) -> Pair | None:
    from copydetect import compare_files

    shared_a = shared_b = 0.0
    slices_a, slices_b = [], []
    for grade_id in [g for g in one.prints if g in two.prints]:  # in cell order, not a set's
        first, second = one.prints[grade_id], two.prints[grade_id]
        if not first.token_coverage or not second.token_coverage:
            continue
        _, (share_a, share_b), (cut_a, cut_b) = compare_files(first, second)
        shared_a += float(share_a) * first.token_coverage
        shared_b += float(share_b) * second.token_coverage
        if len(cut_a):
            slices_a += _slices(cut_a, one.starts[grade_id])
            slices_b += _slices(cut_b, two.starts[grade_id])
    if not shared_a or not one.own or not two.own:
        return None
    share_a, share_b = float(shared_a / one.own), float(shared_b / two.own)
    shared = int(round(max(shared_a, shared_b)))
    return Pair(a, b, max(share_a, share_b), share_a, share_b, shared, slices_a, slices_b)


def compare(
    cells: dict[str, dict[str, str]],
    release: str,
    setting: Settings,
    current: set[str] | None = None,
) -> tuple[list[Pair], list[str], dict[str, str]]:
    """Every pair of notebooks (name -> grade id -> own code) with at least one current name
    (the others, the reference and the archive, are compared with the current ones only),
    highest score first; the current names with too little own code to judge; and each
    notebook's own code as one text (what the report shows)."""
    current = set(cells) if current is None else current
    discount = _boilerplate(release, setting)
    made = {name: _Submission(parts, setting, discount) for name, parts in cells.items()}
    short = sorted(n for n in current if made[n].own < MIN_OWN)
    names = sorted(cells)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if (a in current or b in current) and a not in short and b not in short:
                pair = _pair(a, b, made[a], made[b])
                if pair is not None:
                    pairs.append(pair)
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    return pairs, short, {name: one.text for name, one in made.items()}


def run(
    course: Path,
    module: CourseModule,
    archive: Path | None = None,
    setting: Settings | None = None,
) -> Result:
    """Compare the module's submissions with each other, the reference and the archive."""
    setting = setting or settings(course)
    release = Release(module, course)
    found = submissions(course, module)
    if not found:
        raise TitoError(
            f"no submission of {module.name} in {course / layout.SUBMITTED}",
            hint=f"collect them first (submitted/<student>/{module.name}/{module.slug}.ipynb)",
        )
    cells = {}
    for student, path in found.items():
        notebook = _read(path)
        if notebook is not None:
            cells[student] = release.own(notebook)
    current = set(cells)
    cells[REFERENCE] = release.own(read_source(paths.source(module)))
    if archive is not None:
        for name, path in archived(archive, module).items():
            notebook = _read(path)
            if notebook is not None:
                cells[name] = release.own(notebook)
    pairs, short, texts = compare(cells, release.code, setting, current)
    return Result(module.name, setting, texts, pairs, short)


# --- what it leaves behind: the record (grades.csv reads it) and the report ---------------------


def record_path(course: Path, module: CourseModule) -> Path:
    """The record grades.csv reads (csv_value)."""
    return course / "tito" / "similarity" / f"{layout.assignment_id(module)}.json"


def report_path(course: Path, module: CourseModule) -> Path:
    return course / "tito" / "similarity" / f"{layout.assignment_id(module)}.html"


def save(course: Path, module: CourseModule, result: Result) -> tuple[Path, Path]:
    """Write the record (best match per student, flagged pairs) and the HTML report."""
    record = {
        "module": result.module,
        "settings": asdict(result.settings),
        "best": {
            name: {"score": s, "with": w, "flagged": f}
            for name, (s, w, f) in sorted(result.best().items())
        },
        "flagged": [[p.a, p.b, round(p.score, 4)] for p in result.flagged()],
        "too_short": result.too_short,
    }
    paths.write_atomic(record_path(course, module), json.dumps(record, indent=1))
    paths.write_atomic(report_path(course, module), page(result))
    return record_path(course, module), report_path(course, module)


def csv_value(course: Path, assignment: str, student: str) -> str:
    """grades.csv's similarity cell for one assignment (NN_slug): the highest match and with
    whom ('' when never checked), marked FLAGGED when the check that wrote it flagged it."""
    try:
        path = course / "tito" / "similarity" / f"{assignment}.json"
        record = json.loads(path.read_text(encoding="utf-8"))
        best = record["best"].get(student)
        threshold = float(record["settings"]["threshold"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ""
    if not best:
        return ""
    flag = "FLAGGED " if best.get("flagged", best["score"] >= threshold) else ""
    return f"{flag}{best['score']:.2f} with {best['with']}"
