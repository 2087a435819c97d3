"""Generation's one loop, what it checks before it samples, how it steers the logits (repetition
penalty, top-p), and whether module 17's cache gives it its logits.

`sampling_loop` is the only token-sampling loop in the package: module 13's `GPT.generate`,
module 17's `cached_generate`, the given `Seq2SeqTransformer.generate` and `cached_decode` each
pass it how to get the next position's logits (the whole context again, or one cached step), so
a bad argument reads the same and a seed draws the same tokens wherever it is passed.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson; it imports nothing from the course.
"""

import os

import numpy as np


def _check_generate_args(max_new_tokens, temperature, top_k, vocab_size, stop_token) -> None:
    if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    number = isinstance(temperature, (int, float, np.integer, np.floating))
    if not (number and np.isfinite(temperature) and temperature >= 0):
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
    top_k=None,
) -> np.ndarray:
    """`logits` (B, V) with the tokens of `context` (B, T) penalised and those past top-p -inf.

    Repetition penalty (CTRL): a token already in its row's context has a positive logit divided
    by the penalty and a negative one multiplied by it, so it is less likely either way; it applies
    at temperature 0 too. Top-p (nucleus): at this temperature, keep the smallest set of likeliest
    tokens whose probabilities reach `top_p`. 1 (or None) turns either off. With `top_k` too, the
    nucleus is taken from the k likeliest tokens' renormalised probabilities (Hugging Face's
    order: top-k, then top-p); the k are module 13's `sample_next`'s, ties to the lowest ids,
    and that function applies top-k itself, so without top-p `top_k` changes nothing here.
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
        scaled = logits.astype(np.float64) / temperature  # what sample_next ranks, exactly
        probs = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        order = np.argsort(-scaled, axis=-1, kind="stable")  # likeliest first, ties by id, (B, V)
        ranked = np.take_along_axis(probs, order, axis=-1)
        if top_k is not None:
            ranked[:, top_k:] = 0  # top-k first: only the k likeliest share the probability
        ranked /= ranked.sum(axis=-1, keepdims=True)
        # a token stays if the likelier ones before it hold less than top_p
        stays = (np.cumsum(ranked, axis=-1) - ranked < top_p) & (ranked > 0)
        keep = np.empty(logits.shape, dtype=bool)
        np.put_along_axis(keep, order, stays, axis=-1)
        logits = np.where(keep, logits, -np.inf)
    return logits


def sampling_loop(tokens: np.ndarray, next_logits, sample_next, max_new_tokens: int, *,
                  temperature: float = 1.0, top_k=None, seed=None, stop_token=None, top_p=None,
                  repetition_penalty: float = 1.0, context: int | None = None) -> np.ndarray:  # fmt: skip
    """Append `max_new_tokens` sampled ids to `tokens` (B, T); returns (B, T + new) ids.

    `next_logits(tokens)` gives the next position's logits (B, V) after every token so far;
    `sample_next(logits, temperature, top_k, rng)` (module 13's) draws one id per row. The last
    `context` tokens (all, for None) are what the repetition penalty looks at. Once every row
    has produced `stop_token` the loop ends early; finished rows keep repeating it.
    """
    draws = np.random.default_rng(
        seed
    )  # one generator for the whole sequence: a seed reproduces it
    stopped = np.zeros(len(tokens), dtype=bool)
    for _ in range(max_new_tokens):
        logits = next_logits(tokens)  # the next position's logits, (B, V)
        window = tokens if context is None else tokens[:, -context:]
        logits = steer_logits(logits, window, temperature, top_p, repetition_penalty, top_k)
        next_ids = sample_next(logits, temperature, top_k, draws)  # one draw per batch row, (B,)
        if stop_token is not None:  # rows that already produced the stop token keep repeating it
            next_ids = np.where(stopped, stop_token, next_ids)
            stopped |= next_ids == stop_token
        tokens = np.concatenate([tokens, next_ids[:, None]], axis=1)  # append
        if stopped.all():
            break
    return tokens


def _cached_generation(use_cache, model=None):
    """Module 17's `tinytorch.memo.generation`, or None: recompute every step.

    `use_cache=None` (the default of `generate`) caches when module 17 is in the package and
    written (a student edition ships its stubs until it is published), True insists on it, False
    never caches. The tokens are the same either way (module 17 tests it).
    A model that `accelerate` gave a `fast_generation` gets that instead: its `cached_generate`
    takes module 17's arguments and gives the same tokens (tinytorch/accel/decode.py).
    """
    if use_cache is not None and not use_cache:
        return None
    needs = (
        "use_cache=True needs the KV cache of module 17 (memoization): tito module complete 17 "
        "(or tito module export 17), or pass use_cache=False"
    )
    try:
        import tinytorch.memo.generation as generation
    except ModuleNotFoundError as err:
        if err.name != "tinytorch.memo.generation" or use_cache:
            raise ModuleNotFoundError(needs, name=err.name) from None
        return None
    if _stubbed(generation):
        if use_cache:
            raise NotImplementedError(needs)
        return None
    return getattr(model, "fast_generation", None) or generation


def _stubbed(module) -> bool:
    """True while the module's file still holds a stub that raises "...: write this part" (a
    student edition's unpublished modules, or a lesson not written yet); read once a version."""
    try:
        key = (module.__file__, os.stat(module.__file__).st_mtime_ns)
        if key not in _STUBBED:
            with open(module.__file__, encoding="utf-8") as f:
                _STUBBED[key] = ': write this part")' in f.read()
    except (OSError, TypeError, AttributeError):
        return False
    return _STUBBED[key]


_STUBBED: dict = {}


__all__ = ["sampling_loop", "steer_logits"]
