"""RMSNorm, rotary positions, SiLU and SwiGLU: values, finite differences, errors."""

import numpy as np
import pytest
from fdcheck import check_function, check_graph

from tinytorch.core.tensor import ShapeError, Tensor, precision
from tinytorch.nn.llama import (
    RMSNorm,
    RMSNormFunction,
    RotaryEmbedding,
    RotaryFunction,
    SiLUFunction,
    SwiGLU,
    llama_hidden_dim,
    rotary_angles,
    silu,
)


def test_rmsnorm_scales_each_position_to_unit_rms(rng):
    x = Tensor(rng.normal(3.0, 5.0, (2, 4, 32)))
    y = RMSNorm(32)(x).data
    assert y.dtype == np.float32
    np.testing.assert_allclose(np.sqrt((y * y).mean(axis=-1)), 1, atol=1e-4)
    # no mean is subtracted: the direction of each position is kept
    cos = (y * x.data).sum(-1) / np.linalg.norm(y, axis=-1) / np.linalg.norm(x.data, axis=-1)
    np.testing.assert_allclose(cos, 1, atol=1e-5)


def test_rmsnorm_eps_matters_for_a_quiet_input():
    x = np.full((1, 4), 1e-3)
    with precision(np.float64):
        y = RMSNorm(4, eps=1e-5)(Tensor(x)).data
    np.testing.assert_allclose(y, 1e-3 / np.sqrt(1e-6 + 1e-5))


@pytest.mark.parametrize("shape", [(5,), (3, 6), (2, 3, 8)])
def test_rmsnorm_backward_matches_differences(rng, shape):
    x, w = rng.normal(size=shape), rng.normal(size=shape[-1])
    check_function(RMSNormFunction, x, w, kwargs={"eps": 1e-5})
    check_function(RMSNormFunction, x * 1e-3, w, kwargs={"eps": 1e-5})  # where eps dominates


def test_rmsnorm_gradients_through_the_engine(rng):
    def build(x, w):
        norm = RMSNorm(6)
        norm.weight = w
        return norm(x * x + x)  # a graph around it

    check_graph(build, rng.normal(size=(2, 3, 6)), rng.normal(size=6))


def test_rmsnorm_rejects_a_wrong_width():
    with pytest.raises(ShapeError, match=r"RMSNorm\(8\).*\(2, 5\).*8 features"):
        RMSNorm(8)(np.ones((2, 5)))
    with pytest.raises(ValueError, match="positive integer"):
        RMSNorm(0)


def test_rotary_angles_follow_the_base():
    angles = rotary_angles(4, [0, 1, 3], theta=100.0)
    np.testing.assert_allclose(angles, [[0, 0], [1, 0.1], [3, 0.3]])


def test_rotary_rotates_interleaved_pairs(rng):
    x = rng.normal(size=(1, 3, 4))
    with precision(np.float64):
        y = RotaryEmbedding(4, 8, theta=100.0)(Tensor(x), start=2).data
    for t in range(3):
        for k, freq in enumerate((1.0, 0.1)):
            a = (t + 2) * freq
            even, odd = x[0, t, 2 * k], x[0, t, 2 * k + 1]
            np.testing.assert_allclose(
                y[0, t, 2 * k : 2 * k + 2],
                [even * np.cos(a) - odd * np.sin(a), even * np.sin(a) + odd * np.cos(a)],
            )


def test_rotary_scores_depend_on_distance_only(rng):
    rotary = RotaryEmbedding(16, 64)
    q, k = rng.normal(size=(1, 16)), rng.normal(size=(1, 16))
    with precision(np.float64):

        def score(m, n):
            return float((rotary(Tensor(q), m).data * rotary(Tensor(k), n).data).sum())

        near = [score(m, m - 2) for m in range(2, 60, 7)]
        np.testing.assert_allclose(near, near[0], rtol=1e-10)
        assert abs(score(10, 0) - score(10, 8)) > 1e-3  # and the distance does change it


def test_rotary_at_start_equals_the_tail_of_a_longer_run(rng):
    rotary = RotaryEmbedding(8, 16)
    x = rng.normal(size=(2, 3, 6, 8)).astype(np.float32)
    whole = rotary(Tensor(x)).data
    np.testing.assert_allclose(rotary(Tensor(x[:, :, 4:]), start=4).data, whole[:, :, 4:])
    np.testing.assert_array_equal(rotary(Tensor(x[:, :, :1])).data, x[:, :, :1])  # position 0


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5, 8)])
def test_rotary_backward_matches_differences(rng, shape):
    steps, half = shape[-2], shape[-1] // 2
    angles = rng.uniform(-4, 4, (steps, half))
    kwargs = {"cos": np.cos(angles), "sin": np.sin(angles)}
    check_function(RotaryFunction, rng.normal(size=shape), kwargs=kwargs)


def test_rotary_errors_name_the_fix():
    with pytest.raises(ValueError, match="head_dim must be even"):
        RotaryEmbedding(5, 8)
    with pytest.raises(ShapeError, match="max_seq_len=8"):
        RotaryEmbedding(4, 8)(np.ones((1, 3, 4)), start=6)
    with pytest.raises(ShapeError, match=r"\(\.\.\., T, 4\)"):
        RotaryEmbedding(4, 8)(np.ones((1, 3, 6)))


def test_silu_values_and_no_overflow():
    x = np.array([-1000.0, -2.0, 0.0, 2.0, 1000.0], dtype=np.float32)
    with np.errstate(over="raise", invalid="raise"):
        y = silu(Tensor(x)).data
    np.testing.assert_allclose(y, [0, -2 / (1 + np.exp(2)), 0, 2 / (1 + np.exp(-2)), 1000])


def test_silu_backward_matches_differences(rng):
    check_function(SiLUFunction, rng.normal(0, 4, (3, 7)))


@pytest.mark.parametrize(
    "embed_dim, multiple_of, hidden", [(4096, 256, 11008), (5120, 256, 13824), (64, 16, 176)]
)
def test_hidden_size_is_llamas_rule(embed_dim, multiple_of, hidden):
    assert llama_hidden_dim(embed_dim, multiple_of) == hidden


def test_swiglu_is_a_gated_product(rng):
    ff = SwiGLU(8, hidden_dim=12)
    assert ff.w1.weight.shape == ff.w3.weight.shape == (8, 12) and ff.w2.weight.shape == (12, 8)
    assert ff.w1.bias is None and ff.w2.bias is None and ff.w3.bias is None
    x = rng.normal(size=(2, 3, 8)).astype(np.float32)
    a, b = x @ ff.w1.weight.data, x @ ff.w3.weight.data
    want = (a / (1 + np.exp(-a)) * b) @ ff.w2.weight.data
    np.testing.assert_allclose(ff(Tensor(x)).data, want, rtol=1e-4, atol=1e-6)
    assert SwiGLU(64, multiple_of=16).w1.weight.shape == (64, 176)


def test_swiglu_gradients_pass_finite_differences(rng):
    np.random.seed(0)
    ff = SwiGLU(4, hidden_dim=6)
    ws = [ff.w1.weight.data, ff.w2.weight.data, ff.w3.weight.data]

    def build(x, w1, w2, w3):
        ff.w1.weight, ff.w2.weight, ff.w3.weight = w1, w2, w3
        return ff(x)

    check_graph(build, rng.normal(size=(2, 3, 4)), *ws)
