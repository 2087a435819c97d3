"""tinytorch: a deep-learning framework built in numpy, one course module at a time.

Each file under this package is generated from modules/ by `tito module export`, except the
given files (tito/curriculum/catalog.py GIVEN: the `__init__` files, the name table, product code such as
the Hugging Face export). Names resolve on first use (a module `__getattr__` built from the one
table in `tinytorch/names.py`), so `import tinytorch` works at every stage of the course, and a
name whose module is not in the package yet says which module to complete.

    import tinytorch
    x = tinytorch.Tensor([1.0, 2.0])
    layer = tinytorch.nn.Linear(2, 3)       # also tinytorch.core.layers.Linear
"""

from tinytorch.core.allocator import keep_freed_memory
from tinytorch.names import lazy_module

__version__ = "0.1.0"

keep_freed_memory()  # reuse freed blocks of a few MiB (tinytorch/core/allocator.py says why)

SUBPACKAGES = ("accel", "bench", "compress", "core", "data", "memo", "models", "nn", "olympics",
               "optim", "profile", "text")  # fmt: skip
__getattr__, _dir, __all__ = lazy_module("tinytorch", SUBPACKAGES)


def __dir__():
    return [*_dir(), "__version__"]
