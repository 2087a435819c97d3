"""LayerNorm, MLP and TransformerBlock: statistics, finite differences, PyTorch, errors."""

import numpy as np
import oracle
import pytest
from fdcheck import check_graph

from tinytorch.core.attention import causal_mask
from tinytorch.core.tensor import ShapeError, Tensor, precision
from tinytorch.core.transformer import TransformerBlock
from tinytorch.nn import MLP, LayerNorm

REF = oracle.load(__file__)  # PyTorch's answers (tests/torch_oracle/m13_transformers.py)


def test_layernorm_seed_example_mean_zero_std_one(rng):
    ln = LayerNorm(512)
    x = Tensor(rng.normal(2.0, 3.0, (2, 10, 512)))
    y = ln.forward(x)
    assert y.shape == (2, 10, 512) and y.dtype == np.float32
    np.testing.assert_allclose(y.data.mean(axis=-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.data.std(axis=-1), 1.0, atol=1e-4)
    assert abs(y.mean().item()) < 1e-5 and abs(y.std().item() - 1) < 1e-4
    assert ln.gamma.shape == (512,) and ln.beta.shape == (512,)
    assert [p is q for p, q in zip(ln.parameters(), [ln.gamma, ln.beta])] == [True, True]


def test_layernorm_matches_torch_with_learned_affine():
    case = REF.case("layernorm")  # torch.nn.LayerNorm(16) in float64 with this gamma and beta
    ln = LayerNorm(16)
    ln.gamma.data[:], ln.beta.data[:] = case["gamma"], case["beta"]
    xt = Tensor(case["x"], requires_grad=True)
    out = ln(xt)
    (out * Tensor(case["weight"])).sum().backward()
    np.testing.assert_allclose(out.data, case["out"], atol=2e-5)
    np.testing.assert_allclose(xt.grad, case["grad_x"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ln.gamma.grad, case["grad_gamma"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ln.beta.grad, case["grad_beta"], rtol=1e-4, atol=1e-4)


def _layernorm(x, gamma, beta):
    ln = LayerNorm(x.shape[-1])
    ln.gamma, ln.beta = gamma, beta
    return ln(x)


def test_layernorm_gradients_pass_finite_differences(rng):
    x = rng.normal(size=(2, 3, 6))
    check_graph(_layernorm, x, rng.normal(size=6), rng.normal(size=6))
    check_graph(_layernorm, x * 1e-3, np.ones(6), np.zeros(6))  # variance near eps


def test_layernorm_rejects_wrong_feature_size():
    with pytest.raises(ShapeError, match=r"LayerNorm\(8\).*\(2, 5\).*8 features"):
        LayerNorm(8)(Tensor(np.ones((2, 5))))


def test_mlp_expands_four_times_and_keeps_shape(rng):
    mlp = MLP(embed_dim=512)
    assert mlp.linear1.weight.shape == (512, 2048) and mlp.linear2.weight.shape == (2048, 512)
    x = Tensor(rng.normal(size=(2, 10, 512)))
    assert mlp.forward(x).shape == (2, 10, 512)
    assert MLP(embed_dim=512, hidden_dim=1000).linear1.weight.shape == (512, 1000)


def test_mlp_applies_gelu_between_the_linears():
    # torch.nn.Sequential(Linear(8, 12), GELU("tanh"), Linear(12, 8)) with these weights
    case = REF.case("mlp")
    mlp = MLP(8, hidden_dim=12)
    mlp.linear1.weight.data[...], mlp.linear1.bias.data[...] = case["w1"], case["b1"]
    mlp.linear2.weight.data[...], mlp.linear2.bias.data[...] = case["w2"], case["b2"]
    np.testing.assert_allclose(mlp(Tensor(case["x"])).data, case["out"], atol=1e-5)


def test_mlp_gradients_pass_finite_differences(rng):
    with precision(np.float64):
        mlp = MLP(4, hidden_dim=6)

    def build(x, w1, b2):
        mlp.linear1.weight, mlp.linear2.bias = w1, b2
        return mlp(x)

    check_graph(build, rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 6)), rng.normal(size=4))


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_gradients_pass_finite_differences(rng, norm_first):
    with precision(np.float64):
        block = TransformerBlock(embed_dim=4, num_heads=2, mlp_ratio=2, norm_first=norm_first)
    mask = causal_mask(3)

    def build(x, wq, gamma1, w2):
        block.attention.q_proj.weight, block.ln1.gamma, block.mlp.linear2.weight = wq, gamma1, w2
        return block(x, mask=mask)

    args = [rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 4)), 1 + rng.normal(size=4) * 0.1]
    check_graph(build, *args, rng.normal(size=(8, 4)), rtol=1e-4, atol=1e-6)


def test_block_seed_example_and_architecture(rng):
    block = TransformerBlock(embed_dim=512, num_heads=8, mlp_ratio=4)
    x = Tensor(rng.normal(size=(2, 10, 512)))
    mask = Tensor(np.triu(np.ones((10, 10)) * -np.inf, k=1))
    assert block.forward(x, mask=mask).shape == (2, 10, 512)
    assert block.mlp.linear1.weight.shape == (512, 2048)
    assert {"attention", "ln1", "mlp", "ln2"} <= set(vars(block))


def test_block_residual_path_carries_input_when_sublayers_are_zero(rng):
    block = TransformerBlock(embed_dim=8, num_heads=2)
    block.attention.out_proj.weight.data[:] = 0
    block.attention.out_proj.bias.data[:] = 0
    block.mlp.linear2.weight.data[:] = 0
    block.mlp.linear2.bias.data[:] = 0
    x = rng.normal(size=(2, 5, 8)).astype(np.float32)
    np.testing.assert_array_equal(block(Tensor(x)).data, x)  # pre-norm: x + 0 + 0
    block.norm_first = False  # post-norm normalises the sum instead
    np.testing.assert_allclose(block(Tensor(x)).data.std(axis=-1), 1.0, atol=1e-3)


def test_block_rejects_bad_heads_and_masks(rng):
    with pytest.raises(ValueError, match=r"embed_dim=10 is not divisible by num_heads=4"):
        TransformerBlock(embed_dim=10, num_heads=4)
    block = TransformerBlock(embed_dim=8, num_heads=2)
    x = Tensor(rng.normal(size=(2, 5, 8)))
    with pytest.raises(ShapeError, match=r"mask of shape \(4, 4\).*\(2, 2, 5, 5\)"):
        block(x, mask=np.zeros((4, 4)))
