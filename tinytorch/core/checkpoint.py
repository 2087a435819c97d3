"""Files the package writes, and the checkpoint archive: written atomically, read without pickle.

`write_atomic(path, write)` is the package's one atomic writer (checkpoints, `save_model`, the
Hugging Face export, the milestones' files): a temporary file, then one rename. `write_arrays`
stores a flat {key: array} dictionary as an `.npz` archive through it, and `read_arrays` is the one
reader of such archives: `allow_pickle=False`, with one clear line for a missing, foreign,
pickled or damaged file. `check_fits` says whether saved weights fit a model. Module 07's
`checkpoint_arrays` / `split_checkpoint` decide which keys a checkpoint holds; its
`save_checkpoint`, `read_checkpoint` and `load_checkpoint` use this file, and every other
reader of a checkpoint (`save_model`/`load_model`, the milestones' runs, `tito model`) reads
through `read_checkpoint`.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson; it imports nothing from the course.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np


def write_atomic(path, write) -> Path:
    """Create the file `path` by calling `write(binary_file)` on a temporary file, then renaming.

    A crash leaves the old file or the new one, never half of one. The file gets the permissions
    a plain `open(path, "wb")` would give (0o666 less the umask), not mkstemp's owner-only 0o600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_arrays(path, arrays: dict) -> Path:
    """Save `arrays` as an .npz at exactly `path`, via a temporary file and one rename."""
    return write_atomic(path, lambda handle: np.savez(handle, **arrays))


def read_arrays(path) -> dict:
    """Every array of the .npz at `path`, refusing pickled objects with a clear error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; check the path or save one first")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not an .npz checkpoint; write it with save_checkpoint()")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except ValueError as err:
        if "allow_pickle" not in str(err):
            raise
        raise ValueError(
            f"checkpoint {path} contains pickled Python objects, which could run code on "
            "loading and are refused; save checkpoints with save_checkpoint() (plain arrays only)"
        ) from None
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise ValueError(
            f"checkpoint {path} is damaged ({type(err).__name__}); use an earlier checkpoint"
        ) from None


def json_default(value):
    """JSON for numpy scalars in a checkpoint's `extra`; a clear error for anything else."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(
        f"save_checkpoint: extra holds a {type(value).__name__}, which is neither JSON nor a "
        "numpy array; store numbers, strings, lists, dicts or arrays"
    )


def check_fits(model, weights: dict, path) -> None:
    """Raise one clear error unless `weights` has exactly the model's names and shapes."""
    shapes = {name: p.shape for name, p in model.named_parameters()}
    missing, unexpected = sorted(set(shapes) - set(weights)), sorted(set(weights) - set(shapes))
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {path} does not fit the model: missing {missing}, unexpected "
            f"{unexpected}; load it into the architecture it was saved from"
        )
    for name, shape in shapes.items():
        if weights[name].shape != shape:
            raise ValueError(
                f"checkpoint {path} does not fit the model: '{name}' is "
                f"{weights[name].shape} in the checkpoint but {shape} in the model; "
                "build the model with the sizes it was saved with"
            )


__all__ = ["write_atomic", "write_arrays", "read_arrays", "json_default", "check_fits"]
