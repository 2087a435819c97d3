"""The encoder-decoder: both norms against PyTorch, cached decoding against recomputing."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tinytorch.core.attention import causal_mask, padding_mask
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.core.transformer import DecoderBlock, Seq2SeqTransformer

SOURCE = np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [5, 5, 6, 0, 0]])
LENGTHS = [5, 2, 3]


def small_model(norm_first=True, seed=0):
    np.random.seed(seed)
    return Seq2SeqTransformer(11, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=9,
                              norm_first=norm_first)  # fmt: skip


def _load_attention(torch_attn, ours) -> None:
    w = [ours.q_proj.weight.data, ours.k_proj.weight.data, ours.v_proj.weight.data]
    b = [ours.q_proj.bias.data, ours.k_proj.bias.data, ours.v_proj.bias.data]
    torch_attn.in_proj_weight.copy_(torch.from_numpy(np.concatenate(w, axis=1).T.copy()))
    torch_attn.in_proj_bias.copy_(torch.from_numpy(np.concatenate(b)))
    torch_attn.out_proj.weight.copy_(torch.from_numpy(ours.out_proj.weight.data.T.copy()))
    torch_attn.out_proj.bias.copy_(torch.from_numpy(ours.out_proj.bias.data))


def torch_decoder_layer(block: DecoderBlock) -> nn.TransformerDecoderLayer:
    """PyTorch's own decoder layer (dropout off, GPT-2's GELU) holding `block`'s weights."""
    embed_dim = block.ln1.normalized_shape
    layer = nn.TransformerDecoderLayer(
        embed_dim, block.self_attention.num_heads, block.mlp.linear1.weight.shape[1], dropout=0.0,
        activation=lambda x: F.gelu(x, approximate="tanh"), batch_first=True,
        norm_first=block.norm_first,
    )  # fmt: skip
    with torch.no_grad():
        _load_attention(layer.self_attn, block.self_attention)
        _load_attention(layer.multihead_attn, block.cross_attention)
        for name in ("linear1", "linear2"):
            ours = getattr(block.mlp, name)
            getattr(layer, name).weight.copy_(torch.from_numpy(ours.weight.data.T.copy()))
            getattr(layer, name).bias.copy_(torch.from_numpy(ours.bias.data))
        for theirs, ours in (("norm1", "ln1"), ("norm2", "ln_cross"), ("norm3", "ln2")):
            getattr(layer, theirs).weight.copy_(torch.from_numpy(getattr(block, ours).gamma.data))
            getattr(layer, theirs).bias.copy_(torch.from_numpy(getattr(block, ours).beta.data))
    return layer.eval()


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_matches_torch_with_padded_memory(rng, norm_first):
    np.random.seed(1)
    block = DecoderBlock(16, num_heads=4, mlp_ratio=2, norm_first=norm_first)
    for p in block.parameters():  # non-trivial norms, so their placement matters
        p.data += rng.normal(0, 0.1, p.shape).astype(p.dtype)
    x = rng.normal(size=(3, 4, 16)).astype(np.float32)
    memory = rng.normal(size=(3, 5, 16)).astype(np.float32)
    xt = Tensor(x, requires_grad=True)
    out = block(xt, Tensor(memory), mask=causal_mask(4), memory_mask=padding_mask(LENGTHS, 5))
    weights = rng.normal(size=out.shape).astype(np.float32)
    (out * Tensor(weights)).sum().backward()

    tx = torch.tensor(x, requires_grad=True)
    keep = np.arange(5) < np.array(LENGTHS)[:, None]
    want = torch_decoder_layer(block)(
        tx, torch.tensor(memory), tgt_mask=torch.from_numpy(causal_mask(4)),
        memory_key_padding_mask=torch.tensor(~keep),
    )  # fmt: skip
    (want * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(out.data, want.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xt.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-4)


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
