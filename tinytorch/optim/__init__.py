"""Optimizers where a PyTorch user looks for them: `from tinytorch.optim import AdamW`.

Imported on first use from module 06's `tinytorch.core.optimizers` (`tinytorch/names.py`).
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.optim")
