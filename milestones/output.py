"""The output folder of a run: checked before any work, written atomically, never emptied.

Every file goes through tinytorch's `write_atomic` (module 07, the writer of checkpoints), so a
crash never leaves half a file and every file follows the umask. A new run never deletes an
earlier one: `keep_earlier` moves its files whole into <out>/earlier/<the time it last wrote>/.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from milestones.folder import LONGEST_NAME, prepare_out
from tinytorch.core.checkpoint import write_atomic

__all__ = ["EARLIER", "LONGEST_NAME", "keep_earlier", "prepare_out", "write_json"]

EARLIER = "earlier"  # every earlier run, kept whole in <out>/earlier/<YYYY-MM-DD-HHMMSS>/


def keep_earlier(folder: Path, names: list[str], out: Path | None = None) -> Path | None:
    """Move the files of `names` that exist in `folder` into <out>/earlier/<time>/.

    <time> is when that run last wrote a file (local time, a suffix when two share a second), so
    the folder holds it whole (summary, plots, checkpoint) to be read, resumed or exported, and
    every earlier run is kept. `out` defaults to `folder`. None when `folder` held no run.
    """
    found = [folder / name for name in names if (folder / name).is_file()]
    if not found:
        return None
    when = time.strftime("%Y-%m-%d-%H%M%S", time.localtime(max(p.stat().st_mtime for p in found)))
    shelf = (out or folder) / EARLIER
    kept, n = shelf / when, 1
    while kept.exists():
        n += 1
        kept = shelf / f"{when}-{n}"
    kept.mkdir(parents=True)
    for path in found:
        path.replace(kept / path.name)
    return kept


def write_json(path: Path, payload: dict) -> Path:
    text = json.dumps(payload, indent=2) + "\n"
    return write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))
