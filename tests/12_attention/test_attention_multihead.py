"""MultiHeadAttention: gradients, parity with torch.nn.MultiheadAttention, KV cache, plots.

torch.nn.MultiheadAttention's answers, for the weights and inputs stored beside them, are committed
in torch_reference.npz (tests/torch_oracle/m12_attention.py).
"""

import numpy as np
import oracle
import pytest
from fdcheck import check_graph, wrong_values

from tinytorch.core.attention import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    plot_attention,
)
from tinytorch.core.tensor import Tensor, precision

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


REF = oracle.load(__file__)


def _load(attn, case):
    """Give `attn` the case's weights (our (in, out) layout)."""
    for name, p in attn.named_parameters():
        p.data[...] = case[name]


TORCH = "torch.nn.MultiheadAttention's"
AFTER_THE_WEIGHTS = (
    "the attention weights match torch's, so the slip comes after them: _merge_heads "
    "(B, H, T, D) -> (B, T, H, D) -> (B, T, E), or out_proj"
)


def _matches_torch(got, want, what: str, tol: float, blame=None, then: str = "") -> None:
    """One line naming what differs from torch and by how much (no arrays printed)."""
    wrong_values(got, want, what, rtol=0.0, atol=tol, blame=blame, referee=TORCH, then=then)


def _check_output(out, case, weights_checked: bool) -> None:
    then = AFTER_THE_WEIGHTS if weights_checked else ""
    blame = MultiHeadAttention._merge_heads if weights_checked else None
    _matches_torch(out.data, case["out"], "MultiHeadAttention's output", 1e-5, blame, then)


def _check_parameter_grads(attn, case, tol: float) -> None:
    """Each parameter's gradient against torch's, in our (in, out) layout."""
    for name, p in attn.named_parameters():
        _matches_torch(p.grad, case[f"grad.{name}"], f"the gradient of {name}", tol)


def test_bad_head_count_is_rejected_at_construction():
    with pytest.raises(ValueError, match=r"embed_dim=10 is not divisible by num_heads=4"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="positive integer"):
        MultiHeadAttention(8, 0)


def test_parameters_and_layout():
    attn = MultiHeadAttention(12, 3)
    names = [name for name, _ in attn.named_parameters()]
    assert names == [f"{p}.{w}" for p in PROJECTIONS for w in ("weight", "bias")]
    assert attn.head_dim == 4 and attn.q_proj.weight.shape == (12, 12)
    assert len(MultiHeadAttention(12, 3, bias=False).parameters()) == 4


def test_heads_split_and_merge_as_reshapes():
    rng = np.random.default_rng(0)
    attn = MultiHeadAttention(6, 3)
    x = rng.standard_normal((2, 4, 6))
    heads = attn._split_heads(Tensor(x)).data
    assert heads.shape == (2, 3, 4, 2)
    np.testing.assert_allclose(heads[1, 2, 3], x[1, 3, 4:6], rtol=1e-6)  # head 2 = features 4:6


@pytest.mark.parametrize("kind", ["self-causal", "self-padding", "cross"])
def test_multihead_gradients_by_finite_differences(kind):
    rng = np.random.default_rng(1)
    with precision(np.float64):
        attn = MultiHeadAttention(4, 2)
    params = [p.data.astype(np.float64) for p in attn.parameters()]
    x, memory = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))

    def build(x, *tensors):
        if kind == "cross":
            memory, *tensors = tensors
        for (name, _), t in zip(list(attn.named_parameters()), tensors):
            module, attr = name.split(".")
            setattr(getattr(attn, module), attr, t)
        if kind == "self-causal":
            return attn(x, causal_mask(3))
        if kind == "self-padding":
            return attn(x, mask=padding_mask([3, 2], 3))
        return attn(x, key=memory, value=memory, mask=padding_mask([5, 2], 5))

    inputs = (x, memory) if kind == "cross" else (x,)
    check_graph(build, *inputs, *params)


@pytest.mark.parametrize("masking", ["causal", "padding"])
def test_self_attention_parity_with_torch(masking):
    case = REF.case(f"self/{masking}")  # torch's attn_mask / key_padding_mask (lengths 10, 6, 1)
    steps, E, H = 10, 16, 4
    attn = MultiHeadAttention(E, H)
    _load(attn, case)
    mask = causal_mask(steps) if masking == "causal" else padding_mask([10, 6, 1], steps)

    xt = Tensor(case["x"], requires_grad=True)
    out = attn(xt, mask)
    out.backward(case["upstream"])

    dtypes = (out.dtype, xt.grad.dtype)
    assert dtypes == (np.float32, np.float32), "float32 inputs must give float32 outputs and grads"
    weights = "last_attention (the softmax weights of every head)"
    _matches_torch(
        attn.last_attention, case["attention"], weights, 1e-6, MultiHeadAttention.forward
    )
    _check_output(out, case, weights_checked=True)
    _matches_torch(xt.grad, case["grad_x"], "the gradient of the input x", 1e-5)
    _check_parameter_grads(attn, case, 5e-5)


def test_cross_attention_parity_with_torch_and_no_bias():
    case = REF.case("cross")  # torch's key_padding_mask keeping 7 and 3 of the 7 keys
    attn = MultiHeadAttention(8, 2, bias=False)
    _load(attn, case)
    # 4 queries over 7 keys
    xt, mt = Tensor(case["x"], requires_grad=True), Tensor(case["memory"], requires_grad=True)
    out = attn(xt, key=mt, value=mt, mask=padding_mask([7, 3], 7))
    out.backward(case["upstream"])

    shapes = (out.shape, attn.last_attention.shape)
    assert shapes == ((2, 4, 8), (2, 2, 4, 7)), "(output, last_attention) shapes"
    _check_output(out, case, weights_checked=False)
    _matches_torch(xt.grad, case["grad_x"], "the gradient of the queries' input x", 1e-5)
    _matches_torch(mt.grad, case["grad_memory"], "the gradient of the memory (key and value)", 1e-5)
    _check_parameter_grads(attn, case, 5e-5)


def test_causality_of_the_whole_layer():
    np.random.seed(4)
    attn = MultiHeadAttention(8, 2)
    x = np.random.default_rng(4).standard_normal((2, 7, 8))
    first = attn(x, causal_mask(7)).data
    for t in range(6):
        changed = x.copy()
        changed[:, t + 1 :] += 5.0
        second = attn(changed, causal_mask(7)).data
        np.testing.assert_allclose(first[:, : t + 1], second[:, : t + 1], atol=1e-6)
        moved = not np.allclose(first[:, t + 1 :], second[:, t + 1 :], atol=1e-3)
        assert moved, f"changing positions {t + 1}.. left their own outputs unchanged"


def test_weights_change_when_keys_change():
    np.random.seed(5)
    attn = MultiHeadAttention(8, 2)
    rng = np.random.default_rng(5)
    x, memory = rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 4, 8))
    attn(x, key=memory)
    before = attn.last_attention.copy()
    memory[0, 1] += 2.0
    attn(x, key=memory)
    change = float(np.abs(attn.last_attention - before).max())
    assert change > 1e-3, "last_attention did not follow a change of the keys"
    np.testing.assert_allclose(attn.last_attention.sum(-1), 1.0, rtol=1e-5)


def test_mask_and_input_errors_name_both_shapes():
    attn = MultiHeadAttention(8, 2)
    x = np.zeros((2, 5, 8))
    with pytest.raises(ValueError, match=r"\(4, 4\).*\(2, 2, 5, 5\)"):
        attn(x, causal_mask(4))
    with pytest.raises(ValueError, match="key=memory"):
        attn(x, np.zeros((2, 3, 8)))  # a key passed positionally is caught as a bad mask
    with pytest.raises(ValueError, match=r"\(batch, seq_len, 8\).*\(5, 8\)"):
        attn(np.zeros((5, 8)))
    with pytest.raises(ValueError, match="value was given without key"):
        attn(x, value=x)


def test_seed_style_positional_mask_tensor():
    attn = MultiHeadAttention(8, 2)
    mask = Tensor(np.triu(np.ones((4, 4)) * -np.inf, k=1))
    attn(Tensor(np.ones((1, 4, 8))), mask)
    leaked = int(np.count_nonzero(attn.last_attention[0, :, 0, 1:]))
    assert leaked == 0, "query 0 gave weight to later keys through a Tensor mask"


def test_plot_attention_writes_pngs(tmp_path):
    attn = MultiHeadAttention(8, 2)
    tokens = list("hello")
    attn(np.random.default_rng(7).standard_normal((1, 5, 8)), causal_mask(5))
    paths = [
        plot_attention(attn.last_attention, tokens, tmp_path / "all.png"),
        plot_attention(attn.last_attention, tokens, tmp_path / "one.png", head=1),
        plot_attention(
            attn.last_attention[0, 0, :2], tokens[:2], tmp_path / "x.png", key_tokens=tokens
        ),
    ]
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    with pytest.raises(ValueError, match="labels"):
        plot_attention(attn.last_attention, tokens[:3], tmp_path / "bad.png")
