"""tinytorch: a deep-learning framework built in numpy, one course module at a time.

Each file under this package is generated from modules/ by `tito module export`, except the
package `__init__` files, which only name what lives where. Names resolve on first use (a module
`__getattr__`), so `import tinytorch` works at every stage of the course, and a name whose
module is not in the package yet says which module to complete.

    import tinytorch
    x = tinytorch.Tensor([1.0, 2.0])
    layer = tinytorch.nn.Linear(2, 3)       # also tinytorch.core.layers.Linear
"""

import importlib

__version__ = "0.1.0"

# where each package module comes from in the course (for the message when it is missing)
COURSE = {
    "tinytorch.core.tensor": "01 tensor",
    "tinytorch.core.activations": "02 activations",
    "tinytorch.core.layers": "03 layers",
    "tinytorch.core.losses": "04 losses",
    "tinytorch.core.autograd": "05 autograd",
    "tinytorch.core.optimizers": "06 optimizers",
    "tinytorch.core.training": "07 training",
    "tinytorch.data.loader": "08 dataloader",
    "tinytorch.core.spatial": "09 convolutions",
    "tinytorch.text.tokenization": "10 tokenization",
    "tinytorch.text.embeddings": "11 embeddings",
    "tinytorch.core.attention": "12 attention",
    "tinytorch.nn.normalization": "13 transformers",
    "tinytorch.nn.feedforward": "13 transformers",
    "tinytorch.models.transformer": "13 transformers",
    "tinytorch.profile.flops": "14 profiling",
    "tinytorch.profile.profiler": "14 profiling",
    "tinytorch.profile.report": "14 profiling",
    "tinytorch.compress.quantization": "15 quantization",
    "tinytorch.compress.pruning": "16 compression",
    "tinytorch.compress.lowrank": "16 compression",
    "tinytorch.compress.distillation": "16 compression",
    "tinytorch.memo.kvcache": "17 memoization",
    "tinytorch.memo.generation": "17 memoization",
    "tinytorch.accel.kernels": "18 acceleration",
    "tinytorch.accel.optim": "18 acceleration",
    "tinytorch.accel.parallel": "18 acceleration",
    "tinytorch.accel.accelerate": "18 acceleration",
    "tinytorch.bench.harness": "19 benchmarking",
    "tinytorch.olympics.rules": "20 capstone",
}


def lazy_names(package: str, homes: dict[str, str], subpackages=()):
    """A module `__getattr__` and `__dir__` that import each name from its home when first used."""

    def __getattr__(name):
        if name in subpackages:
            return importlib.import_module(f"{package}.{name}")
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        home = homes[name]
        try:
            module = importlib.import_module(home)
        except ModuleNotFoundError as err:
            if err.name != home:
                raise
            number, slug = COURSE[home].split()
            raise ImportError(
                f"{package}.{name} comes from course module {number} {slug}, which this "
                f"tinytorch does not have yet: tito module complete {int(number)} (or tito module "
                f"export {int(number)} for the reference)",
                name=home,
            ) from None
        return getattr(module, name)

    def __dir__():
        return sorted(set(homes) | set(subpackages) | {"__version__"})

    return __getattr__, __dir__


_HOMES = {
    "Tensor": "tinytorch.core.tensor",
    "ShapeError": "tinytorch.core.tensor",
    "is_grad_enabled": "tinytorch.core.tensor",
    "no_grad": "tinytorch.core.autograd",
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names(
    "tinytorch",
    _HOMES,
    (
        "accel",
        "bench",
        "compress",
        "core",
        "data",
        "memo",
        "models",
        "nn",
        "olympics",
        "optim",
        "profile",
        "text",
    ),  # fmt: skip
)
