"""The student's progress file: typed records, written atomically."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from tito import paths
from tito.errors import TitoError


@dataclass
class Completion:
    module: int
    passed: int
    failed: int
    completed_at: str


def _file():
    return paths.state_dir() / "progress.json"


def load() -> dict[int, Completion]:
    path = _file()
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


def _save(records: dict[int, Completion]) -> None:
    body = {"version": 1, "completed": {str(k): asdict(v) for k, v in sorted(records.items())}}
    paths.write_atomic(_file(), json.dumps(body, indent=2) + "\n")


def record(module: int, passed: int, failed: int) -> Completion:
    records = load()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    records[module] = Completion(module, passed, failed, now)
    _save(records)
    return records[module]


def forget(module: int) -> None:
    records = load()
    if records.pop(module, None) is not None:
        _save(records)
