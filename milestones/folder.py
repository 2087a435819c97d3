"""The output folder of a run, checked before any work; it needs nothing from tinytorch.

`output.py` (the transformer milestones) writes through module 07's `write_atomic`; the historical
milestones run before module 07 exists and write through `milestones/history.py`. Both check the
folder here first.
"""

from __future__ import annotations

import errno
from contextlib import contextmanager
from pathlib import Path

from milestones.errors import MilestoneError

# The longest file name a run writes: the temporary twin of summary.json or checkpoint.npz that
# write_atomic creates (".checkpoint.npz.XXXXXXXX.tmp", 28 characters), with room to spare.
LONGEST_NAME = 48


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


@contextmanager
def removed_if_left_empty(folder: Path):
    """Run the block; when it fails, remove `folder` and the parents it made if they are empty.

    A run that fails before writing anything (a wrong --data, a Ctrl-C while the tokenizer
    learns) leaves no empty runs/NAME/ behind; a folder that existed before is always left.
    """
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        yield
    except BaseException:
        for path in made:
            try:
                path.rmdir()
            except OSError:  # not empty (or gone): leave it and everything above it
                break
        raise
