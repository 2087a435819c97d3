"""Where things live: the project root, the student workspace and tito's state folder; and how tito
writes there (atomically)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tito.catalog import CourseModule

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


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


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and a rename, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
