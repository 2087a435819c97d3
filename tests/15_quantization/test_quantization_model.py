"""QuantizedLinear, a quantized GPT, calibration through the listener hook, measured bytes."""

import numpy as np
import oracle
import pytest

from tinytorch.compress.quantization import (
    QuantizedEmbedding,
    QuantizedLinear,
    calibrate,
    model_bytes,
    named_modules,
    quant_params,
    quantize_model,
)
from tinytorch.core.autograd import no_grad
from tinytorch.core.embeddings import Embedding
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.core.transformer import GPT


def small_gpt(seed=0, **kw):
    np.random.seed(seed)
    sizes = dict(vocab_size=24, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=16)
    return GPT(**{**sizes, **kw})


def test_quantized_linear_equals_torch_on_the_dequantized_weight():
    # torch.quantize_per_channel of the weight in torch's (out, in) layout (axis 0, symmetric),
    # then F.linear with its dequantized weight
    case = oracle.load(__file__).case("linear")
    linear = Linear(20, 12)
    linear.weight.data[...], linear.bias.data[...] = case["weight"], case["bias"]
    q = QuantizedLinear.from_linear(linear)
    scale, _ = quant_params(linear.weight.data, 8, True, axis=1)
    np.testing.assert_allclose(scale[0], case["scale"], rtol=1e-6)
    np.testing.assert_array_equal(q.codes().T, case["codes"])
    np.testing.assert_allclose(q(case["x"]).data, case["out"], rtol=1e-5, atol=1e-6)


def test_int4_layer_stores_half_the_bytes_of_int8():
    np.random.seed(2)
    linear = Linear(33, 10, bias=False)
    q8, q4 = QuantizedLinear.from_linear(linear, 8), QuantizedLinear.from_linear(linear, 4)
    assert q8.qweight.nbytes == 330 and q4.qweight.nbytes == 165
    assert q4.nbytes == 165 + 10 * 4 + 10  # codes, float32 scales, int8 zero points
    assert np.abs(q4.codes()).max() <= 7
    np.testing.assert_array_equal(np.abs(q8.codes()).max(axis=0), 127)  # each column's peak


def test_quantize_model_swaps_every_linear_and_keeps_the_original(rng):
    gpt = small_gpt()
    before = gpt.state_dict()
    q = quantize_model(gpt, bits=8)
    names = [n for n, m in named_modules(q) if isinstance(m, QuantizedLinear)]
    assert len(names) == 2 * 6 + 1  # q, k, v, out, linear1, linear2 per block; lm_head
    assert not any(type(m) in (Linear, Embedding) for _, m in named_modules(q))
    assert isinstance(q.position_embedding, QuantizedEmbedding)
    for key, value in gpt.state_dict().items():
        np.testing.assert_array_equal(value, before[key])
    tokens = rng.integers(0, 24, size=(3, 16))
    with no_grad():
        full, quant = gpt(tokens).data, q(tokens).data
    assert 0 < np.abs(full - quant).max() < 0.02 * np.abs(full).max()


def test_a_quantized_gpt_equals_the_float_gpt_holding_the_dequantized_weights(rng):
    gpt = small_gpt(3, tie_weights=True)
    q = quantize_model(gpt, bits=4, per_channel=False)
    twin = small_gpt(3, tie_weights=True)
    for (_, m), (_, qm) in zip(named_modules(twin), named_modules(q)):
        if isinstance(m, (Linear, Embedding)):
            m.weight.data[...] = qm.weight.data
    tokens = rng.integers(0, 24, size=(2, 10))
    with no_grad():
        np.testing.assert_allclose(q(tokens).data, twin(tokens).data, rtol=1e-5, atol=1e-5)


def test_model_bytes_counts_every_array_once(rng):
    gpt = small_gpt(tie_weights=True)
    assert model_bytes(gpt) == sum(p.data.nbytes for p in gpt.parameters())
    q = quantize_model(gpt)
    expected = sum(p.data.nbytes for p in q.parameters())  # embeddings, norms
    for _, m in named_modules(q):
        if isinstance(m, (QuantizedLinear, QuantizedEmbedding)):
            expected += m.nbytes  # a QuantizedLinear's bias is a Tensor outside parameters()
    assert model_bytes(q) == expected
    kept = quantize_model(gpt, embeddings=False)
    assert isinstance(kept.token_embedding, Embedding)
    table = gpt.token_embedding.weight.size + gpt.position_embedding.weight.size
    assert model_bytes(kept) - model_bytes(q) == 3 * table - 5 * (24 + 16)  # a scale per row


def test_calibration_sees_inputs_of_fused_and_plain_linears(rng):
    gpt = small_gpt(5)
    batches = [rng.integers(0, 24, size=(2, 16)) for _ in range(2)]
    ranges = calibrate(gpt, batches)
    assert all(r.count == 2 for r in ranges.values())
    q_in, k_in = ranges["blocks.0.attention.q_proj"], ranges["blocks.0.attention.k_proj"]
    assert (q_in.low, q_in.high) == (k_in.low, k_in.high)  # one input, three projections
    assert ranges["blocks.1.mlp.linear2"].low >= -0.2  # a GELU's output is never below -0.17
    static = quantize_model(gpt, calibration=ranges)
    tokens = batches[0]
    with no_grad():
        gap = np.abs(static(tokens).data - gpt(tokens).data).max()
    assert 0 < gap < 0.05 * np.abs(gpt(tokens).data).max()


def test_calibration_needs_no_change_to_any_class(rng):
    model = Sequential(Linear(4, 6), Linear(6, 2))
    ranges = calibrate(model, [rng.normal(size=(3, 4))])
    assert set(ranges) == {"layers.0", "layers.1"}
    assert type(model.layers[0]).forward is Linear.forward


def test_bad_input_is_one_clear_error():
    q = QuantizedLinear.from_linear(Linear(4, 3))
    with pytest.raises(ShapeError, match="its last axis must be 4"):
        q(Tensor(np.ones((2, 5))))
    with pytest.raises(TypeError, match="from_linear needs a Linear"):
        QuantizedLinear.from_linear(q)
    with pytest.raises(ValueError, match="bits must be"):
        quantize_model(small_gpt(), bits=16)
