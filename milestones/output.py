"""The output folder of a run: checked before any work, written atomically.

Every file goes through tinytorch's `write_atomic` (module 07, the writer of checkpoints), so a
crash never leaves half a file and every file follows the umask.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from milestones.folder import LONGEST_NAME, prepare_out
from tinytorch.core.checkpoint import write_atomic

__all__ = ["LONGEST_NAME", "PREVIOUS", "keep_previous", "prepare_out", "write_json"]

PREVIOUS = "previous"  # the run before this one, moved whole into <out>/previous/


def keep_previous(out: Path, names: list[str]) -> Path | None:
    """Move an earlier run's files (those of `names` that exist) into <out>/previous/.

    The folder then holds that run whole (summary, plots, checkpoint), so it can still be read,
    resumed or exported; the run before it, if one was kept there, is deleted. None when `out`
    held no earlier run.
    """
    found = [out / name for name in names if (out / name).is_file()]
    if not found:
        return None
    kept = out / PREVIOUS
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir()
    for path in found:
        path.replace(kept / path.name)
    return kept


def write_json(path: Path, payload: dict) -> Path:
    text = json.dumps(payload, indent=2) + "\n"
    return write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))
