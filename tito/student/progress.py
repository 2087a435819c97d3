"""The student's progress file: typed records, written atomically."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tito.curriculum import paths
from tito.errors import TitoError


@dataclass
class Completion:
    module: int
    passed: int
    failed: int
    completed_at: str
    # sha256 of each package file the completion installed (path under tinytorch/): what
    # `export --check` compares a completed module with, instead of the reference
    files: dict[str, str] = field(default_factory=dict)


def file() -> Path:
    return paths.state_dir() / "progress.json"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load() -> dict[int, Completion]:
    path = file()
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {int(k): Completion(**v) for k, v in raw.get("completed", {}).items()}
    except (json.JSONDecodeError, TypeError, ValueError, AttributeError):
        raise TitoError(
            f"{path} is damaged",
            hint="move it aside; `tito module complete N` records each module again",
        ) from None


def render(records: dict[int, Completion]) -> str:
    body = {"version": 1, "completed": {str(k): asdict(v) for k, v in sorted(records.items())}}
    return json.dumps(body, indent=2) + "\n"


def with_record(module: int, passed: int, failed: int, files: dict[Path, str]) -> str:
    """The progress file's text once `module` is recorded with the package files it installed."""
    records = load()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    hashes = {rel.as_posix(): digest(text) for rel, text in files.items()}
    records[module] = Completion(module, passed, failed, now, hashes)
    return render(records)


def without(*modules: int) -> str | None:
    """The progress file's text with `modules` forgotten; None when none of them was recorded."""
    records = load()
    if not any(records.pop(m, None) for m in modules):
        return None
    return render(records)
