"""What `generate` checks before it samples, how it steers the logits (repetition penalty, top-p),
and which loop it runs (module 17's cache or not).

Shared by module 13's `GPT.generate`, the given `Seq2SeqTransformer.generate` and module 17's
cached generation, so a bad argument reads the same and a seed draws the same tokens wherever
it is passed.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson; it imports nothing from the course.
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


def steer_logits(
    logits: np.ndarray,
    context: np.ndarray,
    temperature: float,
    top_p=None,
    repetition_penalty: float = 1.0,
) -> np.ndarray:
    """`logits` (B, V) with the tokens of `context` (B, T) penalised and those past top-p -inf.

    Repetition penalty (CTRL): a token already in its row's context has a positive logit divided
    by the penalty and a negative one multiplied by it, so it is less likely either way; it applies
    at temperature 0 too. Top-p (nucleus): at this temperature, keep the smallest set of likeliest
    tokens whose probabilities reach `top_p`. 1 (or None) turns either off.
    """
    if top_p is not None and not (np.isfinite(top_p) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p}")
    if not (np.isfinite(repetition_penalty) and repetition_penalty > 0):
        raise ValueError(
            f"repetition_penalty must be > 0 (1 = off, 1.2 = usual), got {repetition_penalty}"
        )
    if repetition_penalty != 1:
        seen = np.zeros(logits.shape, dtype=bool)
        np.put_along_axis(seen, np.asarray(context, dtype=np.int64), True, axis=-1)
        lowered = np.where(logits > 0, logits / repetition_penalty, logits * repetition_penalty)
        logits = np.where(seen, lowered, logits)
    if top_p is not None and top_p < 1 and temperature > 0:
        scaled = logits.astype(np.float64) / temperature
        probs = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        order = np.argsort(-probs, axis=-1, kind="stable")  # likeliest first, (B, V)
        ranked = np.take_along_axis(probs, order, axis=-1)
        keep = np.empty(logits.shape, dtype=bool)
        # a token stays if the likelier ones before it hold less than top_p
        np.put_along_axis(keep, order, np.cumsum(ranked, axis=-1) - ranked < top_p, axis=-1)
        logits = np.where(keep, logits, -np.inf)
    return logits


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
