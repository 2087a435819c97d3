"""Transformer building blocks: `from tinytorch.nn import LayerNorm, MLP`.

Names resolve lazily, so this package imports before module 13 is exported.
"""

import importlib

_HOMES = {"LayerNorm": "tinytorch.nn.normalization", "MLP": "tinytorch.nn.feedforward"}
__all__ = sorted(_HOMES)


def __getattr__(name):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'tinytorch.nn' has no attribute {name!r}")
