"""PyTorch's answers, committed: the module tests compare with these, so they run without torch.

Each module's tests folder holds `torch_reference.npz`, written by `tests/torch_oracle/make.py`
(which needs torch; `tests/torch_oracle/test_current.py` regenerates every file in memory in CI
and checks it equals the committed one). A key is `case/field`: the case's inputs (drawn from the
seed stored beside them) and PyTorch's outputs and gradients for them.

    REF = oracle.load(__file__)          # the npz beside this test file, read on first use
    case = REF.case("mul")               # {"a": ..., "out": ..., "grad_a": ...}
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FILENAME = "torch_reference.npz"


class Reference:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._arrays: dict[str, np.ndarray] | None = None

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            if not self.path.exists():
                raise FileNotFoundError(
                    f"{self.path} is missing: regenerate it with python tests/torch_oracle/make.py"
                )
            with np.load(self.path, allow_pickle=False) as data:
                self._arrays = {key: data[key] for key in data.files}
        return self._arrays

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            raise KeyError(
                f"{self.path.name} in {self.path.parent.name} has no {key!r}: "
                "regenerate it with python tests/torch_oracle/make.py"
            ) from None

    def case(self, name: str) -> dict[str, np.ndarray]:
        prefix = f"{name}/"
        found = {k[len(prefix) :]: v for k, v in self.arrays.items() if k.startswith(prefix)}
        if not found:
            self[prefix]  # the KeyError that says how to regenerate
        return found

    def cases(self, prefix: str) -> list[dict[str, np.ndarray]]:
        """The numbered cases `prefix/0`, `prefix/1`, ... in order."""
        found, n = [], 0
        while any(k.startswith(f"{prefix}/{n}/") for k in self.arrays):
            found.append(self.case(f"{prefix}/{n}"))
            n += 1
        if not found:
            self[f"{prefix}/0/"]  # the KeyError that says how to regenerate
        return found


def torch_state(case: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A case's `state.*` fields: a torch-layout state dict, for load_torch_state_dict."""
    return {k[len("state.") :]: v for k, v in case.items() if k.startswith("state.")}


def torch_grads(case: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A case's `grad.*` fields: PyTorch's parameter gradients, by torch name."""
    return {k[len("grad.") :]: v for k, v in case.items() if k.startswith("grad.")}


_loaded: dict[Path, Reference] = {}


def load(test_file: str | Path) -> Reference:
    """The reference data in the folder of `test_file` (a test module's `__file__`)."""
    path = Path(test_file).resolve().parent / FILENAME
    return _loaded.setdefault(path, Reference(path))
