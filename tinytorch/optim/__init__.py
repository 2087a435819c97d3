"""Optimizers where a PyTorch user looks for them: `from tinytorch.optim import AdamW`.

Imported on first use from module 06's `tinytorch.core.optimizers`.
"""

from tinytorch import lazy_names

_HOMES = {name: "tinytorch.core.optimizers" for name in ("Optimizer", "SGD", "Adam", "AdamW")}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names("tinytorch.optim", _HOMES)
