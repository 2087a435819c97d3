"""Where things live: the project root, the student workspace and tito's state folder."""

from __future__ import annotations

import os
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
