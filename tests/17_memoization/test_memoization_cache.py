"""KVCache: appends keep every position, buffers grow rarely, bytes match the formula."""

import numpy as np
import pytest

from tinytorch.core.tensor import ShapeError
from tinytorch.core.transformer import GPT, estimate_memory
from tinytorch.memo.generation import cached_forward, new_caches
from tinytorch.memo.kvcache import KVCache, cache_bytes, kv_cache_bytes


def test_appends_return_every_position_across_buffer_growth(rng):
    cache = KVCache()
    keys, values = [], []
    for size in [5, *[1] * 70, 30, 100]:  # past the first buffer, then across regrowths
        k, v = rng.normal(size=(2, 3, size, 4)), rng.normal(size=(2, 3, size, 4))
        keys.append(k)
        values.append(v)
        got_k, got_v = cache.append(k, v)
        np.testing.assert_array_equal(got_k, np.concatenate(keys, axis=2))
        np.testing.assert_array_equal(got_v, np.concatenate(values, axis=2))
    assert len(cache) == cache.length == 205 and cache.k.shape == cache.v.shape == (2, 3, 205, 4)
    assert cache.k.nbytes == 2 * 3 * 205 * 4 * 8  # the filled positions, a view
    assert cache.nbytes >= 2 * cache.k.nbytes  # the buffers, with room to spare


def test_one_position_appends_do_not_copy_the_past_each_step(rng):
    cache = KVCache()
    buffers = set()
    for _ in range(200):
        cache.append(*(rng.normal(size=(1, 2, 1, 4)) for _ in range(2)))
        buffers.add(id(cache._k))
    assert len(buffers) <= 6  # doubling: 16, 32, 64, 128, 256 positions
    assert np.shares_memory(cache.k, cache._k)


def test_max_len_caps_the_buffer_and_says_how_to_continue(rng):
    cache = KVCache(max_len=10)
    cache.append(np.zeros((1, 2, 9, 4)), np.zeros((1, 2, 9, 4)))
    cache.append(np.zeros((1, 2, 1, 4)), np.zeros((1, 2, 1, 4)))
    assert cache.nbytes == 2 * 1 * 2 * 10 * 4 * 8  # never more room than max_len
    with pytest.raises(ShapeError, match=r"exceed max_len=10; reset\(\)"):
        cache.append(np.zeros((1, 2, 1, 4)), np.zeros((1, 2, 1, 4)))
    with pytest.raises(ValueError, match="max_len must be a positive integer"):
        KVCache(max_len=0)


def test_reset_forgets_positions_and_keeps_the_buffers(rng):
    cache = KVCache()
    cache.append(rng.normal(size=(1, 2, 6, 4)), rng.normal(size=(1, 2, 6, 4)))
    held = cache.nbytes
    cache.reset()
    assert len(cache) == 0 and cache.k.shape == (1, 2, 0, 4) and cache.nbytes == held
    new_k = rng.normal(size=(1, 2, 3, 4))
    got_k, _ = cache.append(new_k, new_k)
    np.testing.assert_array_equal(got_k, new_k)


def test_wrong_shapes_are_one_clear_error():
    cache = KVCache()
    with pytest.raises(ShapeError, match=r"\(B, H, T, D\).*\(2, 3, 4\)"):
        cache.append(np.zeros((2, 3, 4)), np.zeros((2, 3, 4)))
    with pytest.raises(ShapeError, match="one shape"):
        cache.append(np.zeros((1, 2, 3, 4)), np.zeros((1, 2, 3, 5)))
    cache.append(np.zeros((1, 2, 3, 4)), np.zeros((1, 2, 3, 4)))
    with pytest.raises(ShapeError, match="same batch size"):
        cache.append(np.zeros((3, 2, 1, 4)), np.zeros((3, 2, 1, 4)))
    assert len(cache) == 3  # the failed appends changed nothing


def test_reset_lets_the_next_sequence_have_another_batch_size(rng):
    cache = KVCache(max_len=8)
    cache.append(rng.normal(size=(2, 1, 3, 4)), rng.normal(size=(2, 1, 3, 4)))
    cache.reset()  # what the error above advises
    k, v = rng.normal(size=(1, 1, 5, 4)), rng.normal(size=(1, 1, 5, 4))
    got_k, got_v = cache.append(k, v)
    np.testing.assert_array_equal(got_k, k)
    np.testing.assert_array_equal(got_v, v)
    assert len(cache) == 5 and cache.nbytes == 2 * 1 * 1 * 8 * 4 * 8
    with pytest.raises(ShapeError, match="same batch size"):  # mid-sequence it is still an error
        cache.append(np.zeros((2, 1, 1, 4)), np.zeros((2, 1, 1, 4)))


@pytest.mark.parametrize("batch,steps", [(1, 24), (3, 24), (2, 9)])
def test_formula_equals_the_bytes_a_gpt_cache_holds(batch, steps):
    np.random.seed(0)
    gpt = GPT(vocab_size=11, embed_dim=24, num_layers=3, num_heads=4, max_seq_len=24)
    caches = new_caches(gpt)
    cached_forward(gpt, np.zeros((batch, steps), dtype=np.int64), caches)
    formula = kv_cache_bytes(3, batch, 4, steps, 6, bytes_per_element=4)
    filled = sum(c.k.nbytes + c.v.nbytes for c in caches)  # the positions written
    assert filled == formula == estimate_memory(gpt.config, batch, steps)["kv_cache"]
    full = kv_cache_bytes(3, batch, 4, 24, 6)  # the buffers' room: capped at the context
    assert cache_bytes(caches) <= full
    if steps == 24:
        assert cache_bytes(caches) == full


def test_cache_bytes_counts_self_and_cross_pairs(rng):
    pair = (KVCache(max_len=4), KVCache(max_len=2))
    pair[0].append(np.zeros((1, 1, 4, 2), np.float32), np.zeros((1, 1, 4, 2), np.float32))
    pair[1].append(np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 2, 2), np.float32))
    one_pair = kv_cache_bytes(1, 1, 1, 4, 2) + kv_cache_bytes(1, 1, 1, 2, 2)
    assert cache_bytes([pair, pair]) == 2 * one_pair
