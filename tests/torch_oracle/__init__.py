"""The generators of the committed PyTorch reference data (see tests/oracle.py and make.py).

One file per module, `mNN_slug.py`, writing to tests/NN_slug/torch_reference.npz: its
`build(cases)` draws each case's inputs from a stated seed with numpy, runs PyTorch on them, and
`cases.put`s inputs and outputs. Only this package imports torch; the module tests never do.
"""

from __future__ import annotations

import numpy as np


def as_array(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch.Tensor
        value = value.detach().cpu().numpy().copy()  # not a view of a buffer updated later
    return np.asarray(value)


class Cases(dict):
    """`case/field` -> array."""

    def put(self, case: str, **fields) -> None:
        for field, value in fields.items():
            key = f"{case}/{field}"
            if key in self:
                raise ValueError(f"{key} is put twice")
            self[key] = as_array(value)
