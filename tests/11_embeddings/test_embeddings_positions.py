"""Sinusoidal and learned position encodings, and the encoding heatmap."""

import math

import numpy as np
import pytest
from fdcheck import check_graph

from tinytorch.core.embeddings import (
    LearnedPositionalEncoding,
    PositionalEncoding,
    plot_encoding,
)
from tinytorch.core.tensor import Tensor


def _paper_table(length, dim):
    """The paper's formula written out, one column at a time, one value at a time."""
    cols = []
    for j in range(dim):
        angles = [pos / 10000 ** ((j - j % 2) / dim) for pos in range(length)]
        cols.append([math.sin(a) if j % 2 == 0 else math.cos(a) for a in angles])
    return np.array(cols, dtype=np.float64).T


@pytest.mark.parametrize("dim", [16, 7])
def test_sinusoidal_values_follow_the_paper(dim):
    pe = PositionalEncoding(max_seq_len=64, embed_dim=dim)
    np.testing.assert_allclose(pe.encoding, _paper_table(64, dim), atol=1e-12)
    x = np.random.default_rng(0).standard_normal((3, 20, dim)).astype(np.float32)
    out = pe(Tensor(x))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.data, x + _paper_table(20, dim), atol=1e-6)


def test_a_few_values_by_hand():
    pe = PositionalEncoding(10, 4)
    np.testing.assert_allclose(pe.encoding[0], [0, 1, 0, 1], atol=1e-12)
    np.testing.assert_allclose(
        pe.encoding[3], [math.sin(3), math.cos(3), math.sin(0.03), math.cos(0.03)], atol=1e-12
    )


def test_offset_selects_later_positions():
    pe = PositionalEncoding(32, 8)
    x = np.zeros((1, 3, 8), dtype=np.float32)
    np.testing.assert_allclose(pe(x, offset=5).data[0], pe.encoding[5:8], atol=1e-6)


def test_gradient_passes_straight_through_and_no_parameters():
    pe = PositionalEncoding(16, 6)
    assert pe.parameters() == []
    x = Tensor(np.random.default_rng(1).standard_normal((2, 5, 6)), requires_grad=True)
    upstream = np.random.default_rng(2).standard_normal((2, 5, 6)).astype(np.float32)
    pe(x).backward(upstream)
    np.testing.assert_array_equal(x.grad, upstream)
    check_graph(lambda t: pe(t) * t, np.random.default_rng(3).standard_normal((2, 4, 6)))


def test_too_long_or_wrong_width_is_a_clear_error():
    pe = PositionalEncoding(8, 4)
    with pytest.raises(ValueError, match="max_seq_len=8"):
        pe(np.zeros((1, 9, 4)))
    with pytest.raises(ValueError, match=r"\(1, 5, 3\)"):
        pe(np.zeros((1, 5, 3)))


def test_learned_positions_are_an_embedding_over_positions():
    pos = LearnedPositionalEncoding(max_seq_len=12, embed_dim=4)
    assert [name for name, _ in pos.named_parameters()] == ["weight"]
    x = np.random.default_rng(4).standard_normal((2, 5, 4)).astype(np.float32)
    out = pos(Tensor(x), offset=3)
    np.testing.assert_allclose(out.data, x + pos.weight.data[3:8], atol=1e-6)
    with pytest.raises(ValueError, match="max_seq_len=12"):
        pos(Tensor(x), offset=8)

    def build(t, weight):
        pos.weight = weight
        return pos(t, offset=2) * t

    rng = np.random.default_rng(5)
    check_graph(build, rng.standard_normal((2, 3, 4)), rng.standard_normal((12, 4)))


def test_plot_encoding_writes_a_png(tmp_path):
    pe = PositionalEncoding(50, 32)
    for i, matrix in enumerate([pe.encoding, Tensor(pe.encoding), pe]):
        path = plot_encoding(matrix, tmp_path / f"pe{i}.png")
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    with pytest.raises(ValueError, match="2-D"):
        plot_encoding(np.zeros(5), tmp_path / "bad.png")
