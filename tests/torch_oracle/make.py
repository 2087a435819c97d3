"""Regenerate the committed PyTorch reference data of the module tests (needs torch).

    python tests/torch_oracle/make.py              # every module; rewrites only what changed
    python tests/torch_oracle/make.py 01_tensor    # one module's folder

Writes tests/NN_slug/torch_reference.npz from tests/torch_oracle/mNN_slug.py. A file is rewritten
only when its arrays differ (the zip's timestamps would otherwise change it every time).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:  # run as a script: make `oracle` and `torch_oracle` importable
    sys.path.insert(0, str(TESTS))

from oracle import FILENAME, Reference  # noqa: E402

from torch_oracle import Cases  # noqa: E402

GENERATORS = [
    "m01_tensor",
    "m02_activations",
    "m03_layers",
    "m04_losses",
    "m05_autograd",
    "m06_optimizers",
    "m07_training",
    "m09_convolutions",
    "m11_embeddings",
    "m12_attention",
    "m13_transformers",
    "m14_profiling",
    "m15_quantization",
    "m16_compression",
    "m17_memoization",
    "m18_acceleration",
    "m20_capstone",
]
# float outputs may differ in the last bits between CPUs (vector widths); inputs must be equal
RTOL, ATOL = 1e-5, 1e-6


def generator(name: str):
    return importlib.import_module(f"torch_oracle.{name}")


def path(name: str) -> Path:
    """Where generator `mNN_slug` writes: tests/NN_slug/torch_reference.npz (imports no torch)."""
    return TESTS / name[1:] / FILENAME


def build(module) -> dict[str, np.ndarray]:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    cases = Cases()
    module.build(cases)
    return dict(cases)


def differences(fresh: dict[str, np.ndarray], committed: dict[str, np.ndarray]) -> list[str]:
    """What differs, one line each (empty when the committed data is current)."""
    found = [f"{key}: not committed" for key in sorted(set(fresh) - set(committed))]
    found += [f"{key}: committed but no longer made" for key in sorted(set(committed) - set(fresh))]
    for key in sorted(set(fresh) & set(committed)):
        new, old = fresh[key], committed[key]
        if new.shape != old.shape or new.dtype != old.dtype:
            found.append(f"{key}: {old.dtype}{old.shape} committed, {new.dtype}{new.shape} made")
        elif new.dtype.kind == "f":
            if not np.allclose(new, old, rtol=RTOL, atol=ATOL, equal_nan=True):
                worst = float(np.max(np.abs(new.astype(np.float64) - old)))
                found.append(f"{key}: values differ (largest difference {worst:.3g})")
        elif not np.array_equal(new, old):
            found.append(f"{key}: values differ")
    return found


def main(argv: list[str]) -> int:
    names = GENERATORS
    if argv:
        names = [n for n in GENERATORS if any(n[1:] == a or n == a for a in argv)]
        if len(names) != len(argv):
            print(f"unknown module among {argv}; known: {', '.join(GENERATORS)}")
            return 2
    for name in names:
        fresh, target = build(generator(name)), path(name)
        if target.exists() and not differences(fresh, Reference(target).arrays):
            print(f"{target.relative_to(TESTS.parent)}: unchanged")
            continue
        np.savez_compressed(target, **fresh)
        size = target.stat().st_size / 1024
        print(f"{target.relative_to(TESTS.parent)}: written, {len(fresh)} arrays, {size:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
