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
from tito.curriculum.catalog import MODULES, CourseModule, find
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


def _stubbed_source(module: CourseModule, root: Path) -> tuple[str, dict[Path, str]]:
    """The module's source as released (jupytext text) and its package files exported from it."""
    notebook = student_notebook(module, root / module.source)
    text = jupytext.writes(notebook, fmt="py:percent")
    files = exporter.render(notebook, module, module.source.as_posix())
    return text, {Path("tinytorch") / rel: body for rel, body in files.items()}


def _normal(line: str) -> str:
    return re.sub(r"\s+", " ", line.split(" #")[0]).strip()


def secrets(stubbed: list[CourseModule], root: Path, names: list[str] | None = None) -> set[str]:
    """The normalised lines an edition must not hold: those of the stubbed modules' solution
    regions and of their reference package files, of meaningful length, that nothing the
    edition rightly holds carries too: the released sources and their exports, the published
    modules' references (their lines, and what their text quotes), and the hand-written files
    (`names`, default: the whole tree) that happen to share a whole code line with a solution
    (`for block in self.blocks:`). A solution line quoted inside a hand-written file is no
    such coincidence: it stays secret."""
    names = _tracked(root) if names is None else names
    derived = {m.source.as_posix() for m in MODULES}
    derived |= {p.as_posix() for m in stubbed for p in m.package_files()}
    public = set()
    for name in names:
        if name not in derived and not name.startswith(LEFT_OUT):
            try:
                text = (root / name).read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            public.update(_normal(line) for line in text.splitlines())
    for module in MODULES:
        text, files = _stubbed_source(module, root)
        if module not in stubbed:
            text = (root / module.source).read_text(encoding="utf-8")
        for line in text.splitlines():  # a released lesson quotes a line on purpose
            public.update(_spoken(line))
        for body in files.values():
            public.update(_normal(line) for line in body.splitlines())
    found = set()
    for module in stubbed:
        inside = False
        for line in (root / module.source).read_text(encoding="utf-8").splitlines():
            marker = line.strip()
            if marker.startswith("### BEGIN"):
                inside = True
            elif marker.startswith("### END"):
                inside = False
            elif inside:
                found.add(_normal(line))
        reference = exporter.render(read_source(root / module.source), module, "x")
        for body in reference.values():
            found.update(_normal(line) for line in body.splitlines())
    return {line for line in found - public if len(line) >= MIN_SECRET}


# a piece of a line between quotes or backticks: a solution line held as a string or quoted in
# prose is as much a leak as one written out
_QUOTED = re.compile(r"""(["'`])(.+?)\1""")


def _spoken(line: str) -> set[str]:
    """The normalised line and each normalised quoted piece of it."""
    return {_normal(line)} | {_normal(inside) for _, inside in _QUOTED.findall(line)}


def leaks(folder: Path, secret: set[str]) -> list[str]:
    """'path: line' for every secret line found in a file under `folder` (git objects aside),
    whole or between quotes."""
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or ".git" in path.relative_to(folder).parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary file (the digits) holds no source line
        for line in text.splitlines():
            if _spoken(line) & secret:
                found.append(f"{path.relative_to(folder).as_posix()}: {line.strip()}")
    return found


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

    replaced: dict[str, str] = {}
    for module in stubbed:
        text, files = _stubbed_source(module, root)
        replaced[module.source.as_posix()] = text
        replaced.update({rel.as_posix(): body for rel, body in files.items()})

    out.mkdir(parents=True, exist_ok=True)
    if updated:  # the new edition replaces every tracked file; students' own files are ignored
        for name in _git(out, "ls-files", "-z").split("\0"):
            if name and name != MANIFEST:
                (out / name).unlink(missing_ok=True)
    names = [n for n in _tracked(root) if not n.startswith(LEFT_OUT)]
    edition = Edition(out, published, updated=updated, stubbed=stubbed)
    for name in names:
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in replaced:
            target.write_text(replaced.pop(name), encoding="utf-8")
        else:
            shutil.copy2(root / name, target)
    for name, text in replaced.items():  # an unpublished package file the tree lacked
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")
    manifest = {
        "published": [m.name for m in published],
        "stubbed": [m.name for m in stubbed],
        "note": "made by `tito grade student-edition`; modules not published hold stubs only",
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")

    found = leaks(out, secrets(stubbed, root, names))
    if found:
        shown = "; ".join(found[:3])
        raise TitoError(
            f"the edition in {out} would hold {len(found)} line(s) of unpublished solutions "
            f"({shown}); nothing was committed",
            hint="remove those lines from the files named (they repeat a solution region)",
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
