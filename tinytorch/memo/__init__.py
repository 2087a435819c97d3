"""Memoization (course module 17): the KV cache and cached generation for module 13's models.

    from tinytorch.memo import KVCache, cached_generate
    cached_generate(gpt, prompt, max_new_tokens=50, temperature=0)

Each name is imported from its module on first use, so this package imports at every stage.
"""

from tinytorch import lazy_names

_HOMES = {
    "KVCache": "tinytorch.memo.kvcache",
    "kv_cache_bytes": "tinytorch.memo.kvcache",
    "cache_bytes": "tinytorch.memo.kvcache",
    "cached_attention": "tinytorch.memo.generation",
    "new_caches": "tinytorch.memo.generation",
    "cached_forward": "tinytorch.memo.generation",
    "cached_generate": "tinytorch.memo.generation",
    "cached_decode": "tinytorch.memo.generation",
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names("tinytorch.memo", _HOMES)
