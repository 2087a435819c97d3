"""Memoization (course module 17): the KV cache and cached generation for module 13's models.

    from tinytorch.memo import KVCache, cached_generate
    cached_generate(gpt, prompt, max_new_tokens=50, temperature=0)

Each name is imported from its module on first use, so this package imports at every stage.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.memo")
