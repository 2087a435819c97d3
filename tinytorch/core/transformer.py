"""The transformer family under its course path: `from tinytorch.core.transformer import GPT`.

Module 13's GPT and its parts, with the given files beside them (saving, the PyTorch layout, the
parameter arithmetic, the encoder-decoder models), offered under one path. Each name is imported
from its home on first use (`tinytorch/names.py`, the one table).

Given (tito/curriculum/catalog.py GIVEN): it only names what lives where.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.core.transformer")
