"""The fast versions of the lessons, course module 18: `from tinytorch.accel import accelerate`.

Imported on first use from module 18's files.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.accel")
