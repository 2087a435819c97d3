"""Magnitude and structured pruning: exact counts, sparse bytes, smaller models, same outputs."""

import copy

import numpy as np
import oracle
import pytest

from tinytorch.compress.pruning import (
    PrunedAttention,
    head_importance,
    linears,
    magnitude_mask,
    pack_sparse,
    prune,
    prune_neurons,
    prune_structure,
    sparse_bytes,
    sparsity_of,
    unpack_sparse,
)
from tinytorch.core.attention import MultiHeadAttention, causal_mask
from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformer import GPT, MLP

# torch.nn.utils.prune's masks, committed by tests/torch_oracle/m16_compression.py
REF = oracle.load(__file__)


def small_gpt(seed=0):
    np.random.seed(seed)
    return GPT(vocab_size=20, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=12)


@pytest.mark.parametrize("sparsity", [0.0, 0.1, 0.5, 0.8, 0.99])
def test_mask_drops_exactly_the_smallest(rng, sparsity):
    w = rng.normal(size=(13, 11))
    mask = magnitude_mask(w, sparsity)
    assert (~mask).sum() == round(sparsity * w.size)
    if 0 < sparsity:
        assert np.abs(w[~mask]).max() <= np.abs(w[mask]).min()


def test_ties_at_the_threshold_still_drop_exactly_k():
    w = np.array([[0.5, 0.5, 0.5, 0.5], [1.0, 2.0, 0.5, 3.0]])
    assert (~magnitude_mask(w, 0.5)).sum() == 4


def test_per_layer_masks_equal_torch_l1_unstructured():
    case = REF.case("l1_layer")  # torch_prune.l1_unstructured(layer, "weight", amount=0.6)
    np.testing.assert_array_equal(magnitude_mask(case["w"], 0.6), case["mask"])


def test_global_pruning_equals_torch_global_unstructured():
    # torch_prune.global_unstructured(L1Unstructured, amount=0.7) over torch twins of every
    # linear, each holding the committed weights (each layer drawn at its own scale)
    gpt = small_gpt(1)
    layers = linears(gpt)
    for name, m in layers:
        m.weight.data[...] = REF[f"global/{name}/weight"]
    masks = prune(gpt, 0.7, scope="global")
    for name, m in layers:
        np.testing.assert_array_equal(masks[name], REF[f"global/{name}/mask"])
        np.testing.assert_array_equal(m.weight.data == 0, ~masks[name])
    total = sum(m.weight.size for _, m in layers)
    assert sparsity_of(gpt) == round(0.7 * total) / total


def test_layer_scope_gives_every_layer_the_same_sparsity():
    gpt = small_gpt(2)
    prune(gpt, 0.5, scope="layer")
    for _, m in linears(gpt):
        assert (m.weight.data == 0).mean() == pytest.approx(0.5, abs=1 / m.weight.size)


def test_pruning_leaves_embeddings_norms_and_biases(rng):
    gpt = small_gpt(3)
    before = {n: p.data.copy() for n, p in gpt.named_parameters()}
    prune(gpt, 0.9)
    pruned = {f"{name}.weight" for name, _ in linears(gpt)}
    for n, p in gpt.named_parameters():
        if n not in pruned:
            np.testing.assert_array_equal(p.data, before[n])


def test_sparse_storage_round_trips_and_its_bytes_are_measured(rng):
    w = rng.normal(size=(40, 30)).astype(np.float32)
    w[magnitude_mask(w, 0.8) == 0] = 0
    bits, values = pack_sparse(w)
    np.testing.assert_array_equal(unpack_sparse(bits, values, w.shape), w)
    assert bits.nbytes == 150 and values.nbytes == 4 * 240
    gpt = small_gpt(4)
    dense = sum(p.data.nbytes for p in gpt.parameters())
    prune(gpt, 0.8)
    weights = sum(m.weight.size for _, m in linears(gpt))
    expected = dense - 4 * weights + sum(m.weight.size // 8 for _, m in linears(gpt))
    expected += 4 * sum(int((m.weight.data != 0).sum()) for _, m in linears(gpt))
    assert sparse_bytes(gpt) == expected


def test_removed_neurons_compute_what_zeroed_neurons_compute(rng):
    np.random.seed(5)
    mlp = MLP(10, 40)
    masked = copy.deepcopy(mlp)
    kept = prune_neurons(mlp, 13)
    assert np.all(np.diff(kept) > 0) and len(kept) == 13
    importance = np.linalg.norm(masked.linear1.weight.data, axis=0) * np.linalg.norm(
        masked.linear2.weight.data, axis=1
    )
    assert importance[kept].min() >= np.delete(importance, kept).max()
    dropped = np.setdiff1d(np.arange(40), kept)
    masked.linear1.weight.data[:, dropped] = 0
    masked.linear1.bias.data[dropped] = 0
    masked.linear2.weight.data[dropped] = 0
    x = rng.normal(size=(3, 4, 10))
    with no_grad():
        np.testing.assert_allclose(mlp(x).data, masked(x).data, rtol=1e-5, atol=1e-6)
    assert mlp.num_parameters() == 10 * 13 + 13 + 13 * 10 + 10


def test_removed_heads_compute_what_silenced_heads_compute(rng):
    np.random.seed(6)
    attention = MultiHeadAttention(24, 6)
    slim = PrunedAttention(attention, [5, 1, 3])
    assert slim.heads == [1, 3, 5] and slim.num_heads == 3
    for h in (0, 2, 4):
        attention.out_proj.weight.data[4 * h : 4 * (h + 1)] = 0
    x = Tensor(rng.normal(size=(2, 7, 24)), requires_grad=True)
    out = slim(x, causal_mask(7))
    with no_grad():
        np.testing.assert_allclose(
            out.data, attention(x, causal_mask(7)).data, rtol=1e-5, atol=1e-6
        )
    out.sum().backward()  # the smaller attention trains too
    assert x.grad.shape == x.shape and slim.q_proj.weight.shape == (24, 12)
    assert slim.last_attention.shape == (2, 3, 7, 7)


def test_head_importance_reads_value_and_output_weights():
    np.random.seed(7)
    attention = MultiHeadAttention(8, 2)
    attention.v_proj.weight.data[:, 4:] *= 10
    assert np.argmax(head_importance(attention)) == 1


def test_a_structurally_pruned_gpt_is_smaller_and_still_generates(rng):
    gpt = small_gpt(8)
    slim = copy.deepcopy(gpt)
    prune_structure(slim, head_fraction=0.5, neuron_fraction=0.75)
    for block in slim.blocks:
        assert block.attention.num_heads == 2 and block.mlp.linear1.out_features == 32
    # q, k, v to 2 heads x 8; out_proj from them; the MLP's 32 hidden units; two LayerNorms
    per_block = 3 * (32 * 16 + 16) + (16 * 32 + 32) + 2 * (32 * 32 + 32) + 4 * 32
    assert sum(p.size for p in slim.blocks[0].parameters()) == per_block
    full_block = sum(p.size for p in gpt.blocks[0].parameters())
    assert gpt.num_parameters() - slim.num_parameters() == 2 * (full_block - per_block)
    tokens = rng.integers(0, 20, size=(2, 6))
    out = slim.generate(tokens, 8, temperature=0, use_cache=False)
    assert out.shape == (2, 14)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: magnitude_mask(np.ones(4), 1.0), "sparsity is the fraction"),
        (lambda: magnitude_mask(np.ones(4), -0.1), "sparsity is the fraction"),
        (lambda: prune(small_gpt(), 0.5, scope="row"), "scope must be"),
        (lambda: prune_neurons(MLP(4, 8), 9), "keep must be a whole number"),
        (lambda: PrunedAttention(MultiHeadAttention(8, 2), [2]), "heads must be distinct"),
        (lambda: PrunedAttention(MultiHeadAttention(8, 2), []), "heads must be distinct"),
    ],
)
def test_bad_input_is_one_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
