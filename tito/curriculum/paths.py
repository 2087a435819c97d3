"""Where things live: the project root, the student workspace and tito's state folder; and how tito
writes there (atomically)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tito.curriculum.catalog import CourseModule

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def root() -> Path:
    """The project root; TITO_ROOT points tito at another copy (tests use a temporary one)."""
    return Path(os.environ.get("TITO_ROOT", PACKAGE_ROOT)).resolve()


def state_dir() -> Path:
    return root() / ".tito"


def workspace() -> Path:
    return root() / "workspace"


def source(module: CourseModule) -> Path:
    return root() / module.source


def notebook(module: CourseModule) -> Path:
    """The student's working notebook for a module."""
    return workspace() / module.name / f"{module.slug}.ipynb"


def umask() -> int:
    """The process umask, read without changing it where the system allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stage(path: Path, text: str) -> str:
    """A temporary file beside `path` holding `text`, with the mode a new file would get."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:  # name the file tito meant to write, not its temporary sibling
        raise type(err)(err.errno, err.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; files follow the umask
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def shown(path: Path) -> str:
    """A path as the student can use it from where they ran tito: relative to the working
    directory when it is inside it (and that is not the filesystem's root), else absolute."""
    path, here = Path(path).resolve(), Path.cwd().resolve()
    if here == Path(here.anchor):  # from /, "home/ann/x" would read as a broken path
        return str(path)
    try:
        return path.relative_to(here).as_posix()
    except ValueError:
        return str(path)


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and a rename, so a crash never leaves half a file."""
    write_all({path: text})


def write_all(files: dict[Path, str]) -> None:
    """Write several files all or nothing: every new text is written beside its target first,
    then all are renamed into place; on any failure (Ctrl-C included) the old files return."""
    staged: dict[Path, str] = {}
    try:
        for path, text in files.items():
            staged[path] = _stage(path, text)
    except BaseException:
        for tmp in staged.values():
            Path(tmp).unlink(missing_ok=True)
        raise
    previous = {path: path.read_bytes() if path.exists() else None for path in files}
    replaced = []
    try:
        for path, tmp in staged.items():
            os.replace(tmp, path)
            replaced.append(path)
    except BaseException:
        for path in replaced:
            if previous[path] is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(previous[path])
        for tmp in staged.values():
            Path(tmp).unlink(missing_ok=True)
        raise
