"""Layers where a PyTorch user looks for them: `from tinytorch.nn import Linear, LayerNorm`.

Each name lives in the module of the course that builds it (`tinytorch/names.py`, the one table);
it is imported on first use, so this package imports at every stage of the course.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.nn", ("functional",))
