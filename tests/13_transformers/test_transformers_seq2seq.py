"""The encoder-decoder: both norms against PyTorch, cached decoding against recomputing.

PyTorch's nn.TransformerDecoderLayer answers are committed in torch_reference.npz
(tests/torch_oracle/m13_transformers.py).
"""

import numpy as np
import oracle
import pytest

from tinytorch.core.attention import causal_mask, padding_mask
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.core.transformer import DecoderBlock, Seq2SeqTransformer

SOURCE = np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [5, 5, 6, 0, 0]])
LENGTHS = [5, 2, 3]


def small_model(norm_first=True, seed=0):
    np.random.seed(seed)
    return Seq2SeqTransformer(11, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=9,
                              norm_first=norm_first)  # fmt: skip


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_matches_torch_with_padded_memory(norm_first):
    # PyTorch's own nn.TransformerDecoderLayer (dropout off, GPT-2's GELU) with these weights,
    # a causal target mask and memory padded to LENGTHS
    case = oracle.load(__file__).case(f"decoder/{norm_first}")
    block = DecoderBlock(16, num_heads=4, mlp_ratio=2, norm_first=norm_first)
    for name, p in block.named_parameters():  # non-trivial norms, so their placement matters
        p.data[...] = case[f"param.{name}"]
    xt = Tensor(case["x"], requires_grad=True)
    out = block(
        xt, Tensor(case["memory"]), mask=causal_mask(4), memory_mask=padding_mask(LENGTHS, 5)
    )
    (out * Tensor(case["upstream"])).sum().backward()
    np.testing.assert_allclose(out.data, case["out"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xt.grad, case["grad_x"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("norm_first", [True, False])
def test_cached_greedy_decoding_equals_recomputing_the_prefix(norm_first):
    model = small_model(norm_first, seed=2)
    mask = padding_mask(LENGTHS, 5)
    cached = model.generate(SOURCE, start_token=1, max_new_tokens=8, source_mask=mask)
    uncached = model.generate(SOURCE, 1, 8, mask, use_cache=False)
    prefix = np.ones((3, 1), dtype=np.int64)  # the plainest reference: full forward, argmax
    for _ in range(8):
        logits = model(SOURCE, prefix, source_mask=mask).data[:, -1]
        prefix = np.concatenate([prefix, logits.argmax(-1)[:, None]], axis=1)
    assert cached.shape == (3, 9)
    np.testing.assert_array_equal(cached, prefix)
    np.testing.assert_array_equal(uncached, prefix)


def test_sampled_decoding_is_the_same_with_module_17s_cache_and_without():
    model = small_model(seed=3)
    mask = padding_mask(LENGTHS, 5)
    kwargs = dict(max_new_tokens=6, source_mask=mask, temperature=1.5, top_k=5, seed=11)
    sampled = model.generate(SOURCE, 1, **kwargs)
    np.testing.assert_array_equal(sampled, model.generate(SOURCE, 1, use_cache=False, **kwargs))


def test_generate_runs_the_encoder_once_and_stops_at_the_stop_token():
    model = small_model(seed=4)
    calls = []
    encoder_forward = model.encoder.forward
    model.encoder.forward = lambda *a, **k: calls.append(1) or encoder_forward(*a, **k)
    free = model.generate(SOURCE, 1, 8, padding_mask(LENGTHS, 5))
    assert len(calls) == 1
    stop = int(free[0, 2])  # the token row 0 writes second
    out = model.generate(SOURCE, 1, 8, padding_mask(LENGTHS, 5), stop_token=stop)
    for row, free_row in zip(out, free):
        hit = np.flatnonzero(free_row[1:] == stop)
        end = 1 + (hit[0] if hit.size else 8)  # the stop token's column, or the last one
        np.testing.assert_array_equal(row[: end + 1], free_row[: end + 1])
        assert (row[end:] == stop).all()  # finished rows repeat the stop token
    assert out.shape[1] <= free.shape[1]


def test_lengths_beyond_max_seq_len_are_one_clear_error():
    model = small_model()
    with pytest.raises(ShapeError, match=r"target of 10 positions exceeds max_seq_len=9"):
        model.generate(SOURCE, 1, max_new_tokens=9)
    with pytest.raises(ShapeError, match=r"source of 12 positions exceeds max_seq_len=9"):
        model(np.ones((1, 12), dtype=np.int64), np.ones((1, 2), dtype=np.int64))
    with pytest.raises(ValueError, match=r"token id 11 is out of range|ids must lie in"):
        model.generate(SOURCE, start_token=11, max_new_tokens=2)
