"""The student edition: the repository a course hands its students, holding no solution the
instructor has not published.

It has everything a student runs (tito, the module tests, the milestones, the data, the docs)
and differs from the full repository in two places:

- `modules/`: an unpublished module's source has every solution region replaced by its stub
  (the text `tito module open` gives a student) and no hidden test; a published module's source
  is whole, so `tito diagnose` and the milestones work for it as in the full repository;
- `tinytorch/`: an unpublished module's package files are exported from the stubbed source, so
  the package imports, and each stub says which module writes it; a published module's are the
  reference.

The edition is a fresh git repository: its first commit holds no history of the full one, and a
later edition (more modules published) is committed on top, so students `git pull` it. Before
committing, every file is searched for the solution lines of the unpublished modules; one found
stops the release.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import jupytext

from tito.curriculum import exporter, paths
from tito.curriculum.catalog import GIVEN_REQUIRES, MODULES, CourseModule, closure, find
from tito.curriculum.notebooks import BEGIN_SOLUTION, read_source, student_notebook
from tito.errors import TitoError

MANIFEST = "edition.json"
# instructor-only parts of the full repository: tito's own tests (they grade the reference),
# CI, and what a course run leaves behind
LEFT_OUT = ("tests/tito/", ".ci/", "course/", "runs/", "workspace/", ".tito/")
# when the full repository is not a git checkout, these are never copied
NEVER = {".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", "build", "benchmarks/out"}
MIN_SECRET = 16  # a solution line shorter than this (normalised) is not a leak (`return x`)


@dataclass
class Edition:
    folder: Path
    published: list[CourseModule]
    files: int = 0
    size: int = 0  # bytes of the files written (git objects not counted)
    commit: str = ""
    updated: bool = False
    stubbed: list[CourseModule] = field(default_factory=list)


def parse_published(spec: str | None) -> list[CourseModule]:
    """'01-07', '1,3,5-6', 'all' or '' (none) -> modules, in course order."""
    if not spec or spec.strip().lower() == "none":
        return []
    if spec.strip().lower() == "all":
        return list(MODULES)
    chosen: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        ends = part.split("-")
        if len(ends) == 2 and all(e.strip().isdigit() for e in ends):
            low, high = (find(e.strip()).number for e in ends)
            if low > high:
                raise TitoError(f"published range {part!r} runs backwards", hint="write e.g. 01-07")
            chosen.update(range(low, high + 1))
        elif len(ends) == 1:
            chosen.add(find(part).number)
        else:
            raise TitoError(f"cannot read {part!r} as modules", hint="write e.g. 01-07 or 1,3,5-6")
    return [m for m in MODULES if m.number in chosen]


def holds_reference(module: CourseModule) -> bool:
    """Whether this copy of the course holds the module's reference solution (a student
    edition does not, for a module its instructor has not published)."""
    source = paths.source(module)
    return not source.exists() or BEGIN_SOLUTION in source.read_text(encoding="utf-8")


# --- what goes in ---------------------------------------------------------------------------------


def _tracked(root: Path) -> list[str]:
    """The full repository's files: what git tracks there, else every file but NEVER."""
    if (root / ".git").exists():
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached"], cwd=root, capture_output=True, check=False
        )
        if done.returncode == 0:
            names = [n for n in done.stdout.decode().split("\0") if n]
            return sorted(n for n in names if (root / n).is_file())
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath).relative_to(root)
        dirnames[:] = [
            d
            for d in dirnames
            if d not in NEVER and (here / d).as_posix() not in NEVER and not d.endswith(".egg-info")
        ]
        found += [(here / f).as_posix() for f in filenames]
    return sorted(found)


_MEMO: dict[tuple, object] = {}


def _memo(kind: str, path: Path, make):
    """`make()`, kept while the file at `path` is unchanged (an edition reads every lesson a few
    times; the test over every module builds its check once per module)."""
    stat = path.stat()
    key = (kind, path.resolve(), stat.st_mtime_ns, stat.st_size)
    if key not in _MEMO:
        _MEMO[key] = make()
    return _MEMO[key]


def _stubbed_source(module: CourseModule, root: Path) -> tuple[str, dict[Path, str]]:
    """The module's source as released (jupytext text) and its package files exported from it."""

    def make():
        notebook = student_notebook(module, root / module.source)
        text = jupytext.writes(notebook, fmt="py:percent")
        files = exporter.render(notebook, module, module.source.as_posix())
        return text, {Path("tinytorch") / rel: body for rel, body in files.items()}

    return _memo("release", root / module.source, make)


def _reference(module: CourseModule, root: Path) -> tuple[str, dict[Path, str]]:
    """The module's whole source and its package files exported from it (the reference)."""

    def make():
        text = (root / module.source).read_text(encoding="utf-8")
        files = exporter.render(read_source(root / module.source), module, module.source.as_posix())
        return text, {Path("tinytorch") / rel: body for rel, body in files.items()}

    return _memo("reference", root / module.source, make)


def _normal(line: str) -> str:
    return re.sub(r"\s+", " ", line.split(" #")[0]).strip()


def _lines_of(path: Path) -> set[str]:
    """The normalised lines of a text file (none for a binary one)."""

    def make():
        try:
            return {_normal(line) for line in path.read_text(encoding="utf-8").splitlines()}
        except UnicodeDecodeError:
            return set()

    return _memo("lines", path, make)


# a line that answers nothing on its own: a header (an `if ...:`, `for ...:` or `def ...:` line) or
# the opening of a call or literal continued below (`raise ShapeError(`)
_STRUCTURE = re.compile(r"^(if|elif|for|while|with|except|def)\b.*:$|.*[(\[{]$")

# Lines of a module's solution that product code built on it (a later lesson, a given file) also
# writes, and that give nothing away beyond what the module's own lesson states; each says why.
# Every other such line is a leak: spell the later code differently (tinytorch/accel/adamw.py
# and module 18's `_fused_update` were, for module 06's Adam). Module 09's convolution repeats
# two of module 03's lines as the same rule (LAYER_RULES): shared by both.
_INIT = "self.weight = Tensor(np.random.uniform(-bound, bound, shape), requires_grad=True)"
LAYER_RULES = {
    "gb = g.sum(axis=0)": "a bias's gradient: the output gradient summed over rows",
    _INIT: "PyTorch's uniform initialisation, the rule of every layer with weights",
}
SHARED: dict[int, dict[str, str]] = {
    3: {
        "self.has_bias = bias is not None": "the flag of any layer with an optional bias",
        "seen.add(id(value))": "marking an object visited, as any walk over a module tree does",
        "out = rows @ weight": "the matrix product the lesson's formula states",
        **LAYER_RULES,
    },
    9: LAYER_RULES,
    7: {
        "optimizer.zero_grad()": "the training loop's call of module 06's optimizer",
        "optimizer.step()": "the training loop's call of module 06's optimizer",
    },
    11: {"return weight[ids]": "the lookup module 11's docstring states: out = weight[ids]"},
    12: {"return self.out_proj(merged)": "the output projection of the merged heads, as named"},
    18: {"np.exp(scores, out=scores)": "numpy's in-place exp, module 17's softmax step in place"},
}


def _answer(module: CourseModule, root: Path) -> set[str]:
    """The normalised lines of the module's solution regions and of its reference package files."""
    found, inside = set(), False
    for line in (root / module.source).read_text(encoding="utf-8").splitlines():
        marker = line.strip()
        if marker.startswith("### BEGIN"):
            inside = True
        elif marker.startswith("### END"):
            inside = False
        elif inside:
            found.add(_normal(line))
    for body in _reference(module, root)[1].values():
        found.update(_normal(line) for line in body.splitlines())
    return found


def _shipped(module: CourseModule, root: Path, stubbed: list[CourseModule]) -> set[str]:
    """What the edition holds of a module: its released lesson (each line and what it quotes:
    a lesson quotes a line on purpose) and package files, stubbed or the reference."""
    text, files = (_stubbed_source if module in stubbed else _reference)(module, root)
    lines = set().union(*(_spoken(line) for line in text.splitlines()))
    for body in files.values():
        lines.update(_normal(line) for line in body.splitlines())
    return lines


def secrets(stubbed: list[CourseModule], root: Path, names: list[str] | None = None) -> set[str]:
    """The normalised lines an edition must not hold: those of each stubbed module's solution
    regions and reference package files, of meaningful length, except

    - what the module's own release holds (its given code, a line its lesson quotes);
    - what product code that does not build on the module holds (a lesson or given file outside
      the dependents of the module in the catalog, published or not): a coincidence
      (`for block in self.blocks:`), or a line given on that code's own terms;
    - what a hand-written file outside the product (`names`, default: the whole tree; tests,
      milestones, docs) writes out: the course's use of the module's names
      (`optimizer.zero_grad()`); a line quoted there stays secret;
    - a line that answers nothing on its own (`_STRUCTURE`), or one `SHARED` names.

    So product code built on a stubbed module (a later lesson, or a given file whose
    GIVEN_REQUIRES reach it) that spells out one of its solution lines is a leak, published or
    not."""
    names = _tracked(root) if names is None else names
    lessons = {m.source.as_posix() for m in MODULES}
    written: set[str] = set()
    for name in names:
        if not (name in lessons or name.startswith(("tinytorch/", *LEFT_OUT))):
            written |= _lines_of(root / name)
    shipped = {m.number: _shipped(m, root, stubbed) for m in MODULES}
    given = {name: _lines_of(root / name) for name in GIVEN_REQUIRES if (root / name).is_file()}
    found = set()
    for module in stubbed:
        public = written | shipped[module.number] | set(SHARED.get(module.number, {}))
        for other in MODULES:
            if other is not module and module not in closure(other):
                public |= shipped[other.number]
        for name, lines in given.items():
            if module not in closure(GIVEN_REQUIRES[name]):
                public |= lines
        found |= {
            line
            for line in _answer(module, root) - public
            if len(line) >= MIN_SECRET and not _STRUCTURE.match(line)
        }
    return found


# a piece of a line between quotes or backticks: a solution line held as a string or quoted in
# prose is as much a leak as one written out
_QUOTED = re.compile(r"""(["'`])(.+?)\1""")


def _spoken(line: str) -> set[str]:
    """The normalised line and each normalised quoted piece of it."""
    return {_normal(line)} | {_normal(inside) for _, inside in _QUOTED.findall(line)}


def leaks(folder: Path, secret: set[str]) -> list[str]:
    """'path: line' for every secret line found in a file under `folder` (git objects aside),
    whole or between quotes."""
    files = {
        path.relative_to(folder).as_posix(): path
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(folder).parts
    }
    return leaks_in(files, secret)


def leaks_in(files: dict[str, str | Path], secret: set[str]) -> list[str]:
    """'name: line' for every secret line in `files` (name -> its text, or the file holding it)."""
    found = []
    for name, body in sorted(files.items()):
        try:
            text = body.read_text(encoding="utf-8") if isinstance(body, Path) else body
        except UnicodeDecodeError:
            continue  # a binary file (the digits) holds no source line
        for line in text.splitlines():
            if _spoken(line) & secret:
                found.append(f"{name}: {line.strip()}")
    return found


def contents(stubbed: list[CourseModule], root: Path) -> dict[str, str | Path]:
    """The files of the edition in which `stubbed` are not published: name -> its text (a
    stubbed lesson or package file), or the file of the full repository it copies."""
    files: dict[str, str | Path] = {
        name: root / name for name in _tracked(root) if not name.startswith(LEFT_OUT)
    }
    for module in stubbed:  # also an unpublished package file the tree lacked
        text, exported = _stubbed_source(module, root)
        files[module.source.as_posix()] = text
        files.update({rel.as_posix(): body for rel, body in exported.items()})
    return files


# --- writing it -----------------------------------------------------------------------------------


def _git(folder: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "tito",
        "GIT_AUTHOR_EMAIL": "tito@localhost",
        "GIT_COMMITTER_NAME": "tito",
        "GIT_COMMITTER_EMAIL": "tito@localhost",
    }
    try:
        done = subprocess.run(
            ["git", *args], cwd=folder, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise TitoError("a student edition is a git repository, and git is not installed") from None
    if done.returncode != 0:
        raise TitoError(f"git {args[0]} failed in {folder}: {done.stderr.strip()[:300]}")
    return done.stdout.strip()


def _is_edition(folder: Path) -> bool:
    return (folder / MANIFEST).is_file() and (folder / ".git").is_dir()


def build(out: Path, published: list[CourseModule], root: Path | None = None) -> Edition:
    """Write the edition into `out` (new or empty: a fresh repository; an earlier edition: a new
    commit on top of it) and commit it."""
    root = (root or paths.root()).resolve()
    out = out.resolve()
    if out == root or root in out.parents:
        raise TitoError(f"{out} is inside the course repository", hint="write it elsewhere")
    updated = out.exists() and _is_edition(out)
    if out.exists() and not updated and any(out.iterdir()):
        raise TitoError(
            f"{out} exists, is not empty and is not a student edition",
            hint="give a new folder, or the folder of an earlier edition to update it",
        )
    published = sorted(published, key=lambda m: m.number)
    stubbed = [m for m in MODULES if m not in published]
    for module in MODULES:
        if not holds_reference(module) and module in published:
            raise TitoError(
                f"this copy holds no reference for module {module.name} to publish",
                hint="make editions from the full course repository",
            )

    files = contents(stubbed, root)
    out.mkdir(parents=True, exist_ok=True)
    if updated:  # the new edition replaces every tracked file; students' own files are ignored
        for name in _git(out, "ls-files", "-z").split("\0"):
            if name and name != MANIFEST:
                (out / name).unlink(missing_ok=True)
    edition = Edition(out, published, updated=updated, stubbed=stubbed)
    for name, body in files.items():
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, Path):
            shutil.copy2(body, target)
        else:
            target.write_text(body, encoding="utf-8")
    manifest = {
        "published": [m.name for m in published],
        "stubbed": [m.name for m in stubbed],
        "note": "made by `tito grade student-edition`; modules not published hold stubs only",
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")

    found = leaks(out, secrets(stubbed, root))
    if found:
        shown = "; ".join(found[:3])
        raise TitoError(
            f"the edition in {out} would hold {len(found)} line(s) of unpublished solutions "
            f"({shown}); nothing was committed",
            hint="spell those lines differently in the files named: they repeat a solution region",
        )

    if not updated:
        _git(out, "init", "-q", "-b", "main")
    _git(out, "add", "-A")
    listing = ", ".join(f"{m.number:02d}" for m in published) or "none"
    message = f"Student edition: reference published for modules {listing}"
    status = _git(out, "status", "--porcelain")
    if status or not updated:
        _git(out, "commit", "-q", "-m", message)
    edition.commit = _git(out, "rev-parse", "HEAD")
    edition.files = len(_git(out, "ls-files", "-z").split("\0")) - 1
    edition.size = sum(
        (out / n).stat().st_size for n in _git(out, "ls-files", "-z").split("\0") if n
    )
    return edition
