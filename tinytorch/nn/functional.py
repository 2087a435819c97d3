"""Functions where a PyTorch user looks for them: `import tinytorch.nn.functional as F`.

`F.relu`, `F.softmax`, `F.log_softmax`, `F.cross_entropy`, `F.binary_cross_entropy`, ... each
imported on first use from the course module that builds it (`tinytorch/names.py`, the one table).

Given (tito/curriculum/catalog.py GIVEN): it only names what lives where.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.nn.functional")
