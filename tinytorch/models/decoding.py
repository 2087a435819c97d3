"""What `generate` checks before it samples, and which loop it runs (module 17's cache or not).

Shared by module 13's `GPT.generate`, the given `Seq2SeqTransformer.generate` and module 17's
cached generation, so a bad argument reads the same wherever it is passed.

Given product code (tito/catalog.py GIVEN), not a lesson; it imports nothing from the course.
"""

import numpy as np


def _check_generate_args(max_new_tokens, temperature, top_k, vocab_size, stop_token) -> None:
    if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not np.isfinite(temperature) or temperature < 0:
        raise ValueError(
            f"temperature must be >= 0 (0 = greedy, 1 = the model's own distribution), "
            f"got {temperature}"
        )
    if top_k is not None and (not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
    if stop_token is not None and not 0 <= stop_token < vocab_size:
        raise ValueError(
            f"stop_token must be a token id in [0, {vocab_size - 1}], got {stop_token}"
        )


def _cached_generation(use_cache):
    """Module 17's `tinytorch.memo.generation`, or None: recompute every step.

    `use_cache=None` (the default of `generate`) caches when module 17 is in the package, True
    insists on it, False never caches. The tokens are the same either way (module 17 tests it).
    """
    if use_cache is not None and not use_cache:
        return None
    try:
        import tinytorch.memo.generation as generation
    except ModuleNotFoundError as err:
        if err.name != "tinytorch.memo.generation" or use_cache:
            raise ModuleNotFoundError(
                "use_cache=True needs the KV cache of module 17 (memoization): tito module "
                "complete 17 (or tito module export 17), or pass use_cache=False",
                name=err.name,
            ) from None
        return None
    return generation


__all__ = []
