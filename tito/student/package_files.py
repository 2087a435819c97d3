"""Package files tito writes over: what it last wrote into tinytorch/, and a backup of any text
in a package file that neither tito nor the course's git repository put there (a hand edit).

tito writes a lesson's package files from a notebook or a course source; a change made in the
file itself would be lost at the next export, completion or reset, so it is copied first to the
module's backups folder beside the student's notebook, named as `reset` names a notebook backup.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tito.curriculum import catalog, paths
from tito.student import progress


@dataclass(frozen=True)
class Backup:
    original: Path  # the package file, under tinytorch/
    copy: Path  # where its text was saved


def record_file() -> Path:
    """sha256 of each package file as tito last wrote it, by path under tinytorch/."""
    return paths.state_dir() / "package.json"


def _recorded() -> dict[str, str]:
    # a damaged record only costs a backup too many, never a lost edit: read as empty
    try:
        found = json.loads(record_file().read_text(encoding="utf-8")).get("files", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def _committed(root: Path) -> dict[str, str]:
    """Object ids of the package files in the git index of the course's clone (none without
    git): the course's own text, which `git checkout -- tinytorch` puts back."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--stage", "-z", "--", "tinytorch"],
            cwd=root,
            capture_output=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    ids = {}
    for entry in listed.split(b"\0"):
        meta, _, name = entry.partition(b"\t")
        fields = meta.split()
        if len(fields) == 3 and name.startswith(b"tinytorch/"):
            ids[name.decode("utf-8", "replace")[len("tinytorch/") :]] = fields[1].decode()
    return ids


def _git_id(data: bytes, like: str) -> str:
    header = b"blob %d\0" % len(data)
    algorithm = hashlib.sha256 if len(like) == 64 else hashlib.sha1
    return algorithm(header + data).hexdigest()


def _owners() -> dict[str, catalog.CourseModule]:
    return {
        p.relative_to("tinytorch").as_posix(): m for m in catalog.MODULES for p in m.package_files()
    }


def _backup_name(module: catalog.CourseModule, rel: Path, stamp: str) -> str:
    stems = [p.stem for p in module.package_files()]
    name = rel.stem if stems.count(rel.stem) == 1 else f"{rel.parent.name}-{rel.stem}"
    return f"{name}-{stamp}.py"


def stamp() -> str:
    """The time part of a backup's name (a notebook's or a package file's): sorts by time."""
    return datetime.now().strftime("%Y%m%d-%H%M%S-%f")


def protect(writes: dict[Path, str], known: dict[Path, str] | None = None) -> list[Backup]:
    """Before `writes` (path -> text, package files among them) go in: copy each lesson package
    file whose text tito did not write (nor the course's git index holds, nor `known` gives as
    expected) to its module's backups folder, and add the record of what tito writes to `writes`.

    Returns the backups made."""
    root = paths.root()
    package = root / "tinytorch"
    owners = _owners()
    before = _recorded()
    after = dict(before)
    done = progress.load()
    committed: dict[str, str] | None = None  # asked of git only when a file is in doubt
    when = stamp()
    saved = []
    for path, text in list(writes.items()):
        if not path.is_relative_to(package):
            continue
        rel = path.relative_to(package)
        module = owners.get(rel.as_posix())
        if module is None:
            continue
        after[rel.as_posix()] = progress.digest(text)
        if not path.is_file():
            continue
        data = path.read_bytes()
        found = hashlib.sha256(data).hexdigest()
        record = done.get(module.number)
        expected = {progress.digest(text), before.get(rel.as_posix())}
        if record is not None:
            expected.add(record.files.get(rel.as_posix()))
        if known is not None and path in known:
            expected.add(progress.digest(known[path]))
        if found in expected:
            continue
        if committed is None:
            committed = _committed(root)
        index = committed.get(rel.as_posix())
        if index is not None and _git_id(data, index) == index:
            continue
        copy = paths.notebook(module).parent / "backups" / _backup_name(module, rel, when)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
        saved.append(Backup(path, copy))
    body = {"version": 1, "files": dict(sorted(after.items()))}
    writes[record_file()] = json.dumps(body, indent=1) + "\n"
    return saved
