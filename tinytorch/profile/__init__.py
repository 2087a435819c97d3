"""Profiling (course module 14): counts, per-operation times and memory of a model.

    from tinytorch.profile import profile_step, operation_table, machine_rates
    step = profile_step(gpt, x, y)
    print(operation_table(step.rows, machine_rates()))

Each name is imported from its module on first use, so this package imports at every stage.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.profile")
