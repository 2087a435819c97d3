"""The output folder of a run: checked before any work, written atomically.

Every file goes through tinytorch's `write_atomic` (module 07, the writer of checkpoints), so a
crash never leaves half a file and every file follows the umask.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

from milestones.errors import MilestoneError
from tinytorch.core.training import write_atomic

# The longest file name a run writes: the temporary twin of summary.json or checkpoint.npz that
# write_atomic creates (".checkpoint.npz.XXXXXXXX.tmp", 28 characters), with room to spare.
LONGEST_NAME = 48
PREVIOUS = "previous"  # the run before this one, moved whole into <out>/previous/


def prepare_out(out: Path) -> None:
    """Create the output folder and prove it takes the longest file name, before any work."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / (".write-test-".ljust(LONGEST_NAME, "x"))
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise MilestoneError(
            f"cannot write to the output folder {out}: {err.strerror or err}",
            hint=_out_hint(err, out),
        ) from None


def _out_hint(err: OSError, out: Path) -> str:
    """What to do about the error that stopped the output folder being made or written."""
    if err.errno == errno.ENAMETOOLONG:
        return "pass --out DIR with a shorter path"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "pass --out DIR naming a folder you may write to (this one is read-only to you)"
    if err.errno in (errno.ENOTDIR, errno.EEXIST):
        blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), out)
        return f"pass --out DIR naming a folder: {blocker} is a file"
    if err.errno == errno.ENOSPC:
        return "free some disk space, or pass --out DIR on another disk"
    return "pass --out DIR naming a folder you can write to"


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
