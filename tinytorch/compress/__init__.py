"""Compression (course modules 15 and 16): integer weights, pruning, low rank, distillation.

    from tinytorch.compress import quantize_model, model_bytes
    q8 = quantize_model(gpt, bits=8, per_channel=True)

Each name is imported from its module on first use, so this package imports at every stage.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.compress")
