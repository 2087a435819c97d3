"""FLOP and parameter counts against PyTorch's own counter, brute force and the analytic formula."""

import numpy as np
import oracle
import pytest

from tinytorch.core.attention import scaled_dot_product_attention
from tinytorch.core.hooks import listen
from tinytorch.core.layers import Linear
from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.core.transformer import GPT, count_parameters
from tinytorch.profile.flops import (
    backward_flops,
    forward_flops,
    gpt_step_flops,
    matmul_flops,
    parameter_counts,
)
from tinytorch.profile.profiler import Profiler

CONFIGS = [
    dict(vocab_size=23, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=12),
    dict(vocab_size=31, embed_dim=24, num_layers=1, num_heads=3, max_seq_len=9, tie_weights=True),
    dict(
        vocab_size=19,
        embed_dim=16,
        num_layers=2,
        num_heads=4,
        max_seq_len=8,
        norm_first=False,
        mlp_ratio=2,
    ),
]


def gpt(seed=0, **config):
    np.random.seed(seed)
    return GPT(**config)


def profiled_step(model, tokens):
    profiler = Profiler(model)
    with listen(profiler):
        cross_entropy(model(tokens), tokens).backward()
    return profiler


# PyTorch's counts (torch.utils.flop_counter on the torch.nn GPT of tests/torch_reference.py),
# committed by tests/torch_oracle/m14_profiling.py
REF = oracle.load(__file__)


def torch_step_flops(name) -> tuple[int, int]:
    """(forward, forward + backward) matrix-multiply FLOPs PyTorch counts for the same GPT."""
    return int(REF[f"flops/{name}/forward"]), int(REF[f"flops/{name}/total"])


@pytest.mark.parametrize(
    "name, config",
    list(zip(["untied", "tied", "post-norm"], CONFIGS)),
    ids=["untied", "tied", "post-norm"],
)
def test_a_gpt_step_counts_the_flops_pytorch_counts_and_the_formula_predicts(name, config):
    model = gpt(**config)
    tokens = np.random.default_rng(1).integers(
        0, config["vocab_size"], size=(3, config["max_seq_len"])
    )
    profiler = profiled_step(model, tokens)
    forward = sum(e.matmul_flops for e in profiler.events if e.phase == "forward")
    total = profiler.totals()["matmul_flops"]
    torch_forward, torch_total = torch_step_flops(name)
    assert (forward, total) == (torch_forward, torch_total)
    analytic = gpt_step_flops(model.config, *tokens.shape)
    assert total == analytic["total"] == 3 * forward
    c, t = model.config.embed_dim, tokens.shape[1]
    assert analytic["attention_term"] == 12 * model.config.num_layers * tokens.size * t * c


def test_the_parameter_term_is_six_flops_per_multiplying_weight_per_token():
    model = gpt(**CONFIGS[0])
    analytic = gpt_step_flops(model.config, batch=4, seq_len=10)
    multiplying = sum(
        p.size
        for name, p in model.named_parameters()
        if name.endswith(".weight") and p.ndim == 2 and "embedding" not in name
    )
    assert analytic["matmul_parameters"] == multiplying
    assert analytic["parameter_term"] == 6 * multiplying * 40


def test_the_elementwise_rest_is_a_small_share_of_a_wide_model():
    model = gpt(vocab_size=50, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=16)
    tokens = np.random.default_rng(2).integers(0, 50, size=(2, 16))
    totals = profiled_step(model, tokens).totals()
    assert 0 < totals["other_flops"] < 0.1 * totals["matmul_flops"]


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((3, 4), (4, 5)), ((2, 1, 3, 4), (6, 4, 2)), ((4,), (4, 5)), ((2, 3, 4), (4,)), ((4,), (4,))],
)
def test_matmul_flops_is_two_per_multiply_add(a_shape, b_shape):
    a = np.ones(a_shape if len(a_shape) > 1 else (1, *a_shape))
    b = np.ones(b_shape if len(b_shape) > 1 else (*b_shape, 1))
    products = np.einsum("...mk,...kn->...mkn", a, b)  # one entry per multiply-add
    assert matmul_flops(a_shape, b_shape) == 2 * products.size


def test_matmul_flops_names_shapes_that_do_not_fit():
    with pytest.raises(ShapeError, match=r"\(3, 4\) @ \(5, 2\)"):
        matmul_flops((3, 4), (5, 2))
    with pytest.raises(ShapeError, match="at least one axis"):
        matmul_flops((), (3,))


def heard(run):
    """The profiler's events while `run()` builds a graph and runs its backward."""
    profiler = Profiler()
    with listen(profiler):
        out = run()
        out.backward(np.ones(out.shape, dtype=out.dtype))
    return profiler.events


def matmul_count(events, phase):
    return sum(e.matmul_flops for e in events if e.phase == phase)


@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, True)])
def test_the_fused_attention_rule_counts_what_the_lessons_attention_multiplies(needs):
    rng = np.random.default_rng(3)
    b, h, tq, tk, d = 2, 3, 4, 5, 6
    shapes = [(b, h, tq, d), (b, h, tk, d), (b, h, tk, d)]
    q, k, v = (Tensor(rng.normal(size=s), requires_grad=n) for s, n in zip(shapes, needs))
    events = heard(lambda: scaled_dot_product_attention(q, k, v)[0])  # MatMul, Div, softmax, MatMul
    out_shape = (b, h, tq, d)
    fused_forward = forward_flops("FusedAttention", shapes, out_shape)
    fused_backward = backward_flops("FusedAttention", shapes, out_shape, needs)
    assert fused_forward[0] == matmul_count(events, "forward") == 2 * 2 * b * h * tq * tk * d
    assert fused_backward[0] == matmul_count(events, "backward")
    self_attention = [shapes[0]] * 3
    packed = [(3, *shapes[0])]  # q, k, v stacked: self-attention, Tk = Tq
    assert forward_flops("FusedAttention", packed, out_shape) == forward_flops(
        "FusedAttention", self_attention, out_shape
    )


def test_the_fused_projection_rule_counts_three_linears():
    rng = np.random.default_rng(4)
    np.random.seed(4)
    x = Tensor(rng.normal(size=(2, 5, 8)), requires_grad=True)
    layers = [Linear(8, 8) for _ in range(3)]
    events = heard(lambda: layers[0](x) + layers[1](x) + layers[2](x))
    shapes = [(2, 5, 8)] + [(8, 8)] * 3 + [(8,)] * 3
    fused = forward_flops("QKVProjection", shapes, (3, 2, 2, 5, 4), {"has_bias": True})
    back = backward_flops("QKVProjection", shapes, (3, 2, 2, 5, 4), [True] * 7, {"has_bias": True})
    assert fused == (matmul_count(events, "forward"), 3 * 10 * 8)  # three bias additions
    assert back[0] == matmul_count(events, "backward") == 3 * 2 * 2 * 10 * 8 * 8
    assert back[1] == 2 * 10 * 8 + 3 * 10 * 8  # dx sums three parts; three bias gradients


def test_linear_and_matmul_count_only_the_gradients_computed():
    assert forward_flops("LinearFunction", [(7, 3), (3, 2)], (7, 2)) == (2 * 7 * 3 * 2, 0)
    shapes, needs = [(7, 3), (3, 2), (2,)], [False, True, True]
    assert backward_flops("LinearFunction", shapes, (7, 2), needs) == (2 * 7 * 3 * 2, 7 * 2)
    rng = np.random.default_rng(6)
    a = Tensor(rng.normal(size=(4, 3, 5)))
    b = Tensor(rng.normal(size=(5, 2)), requires_grad=True)
    events = heard(lambda: a @ b)
    assert [e.op for e in events] == ["MatMul", "MatMul"]
    assert events[0].matmul_flops == events[1].matmul_flops == 2 * 4 * 3 * 5 * 2


def test_an_operation_without_a_rule_is_marked_unknown_not_free():
    assert forward_flops("SomeNewKernel", [(3, 4)], (3, 4)) == (0, None)
    assert backward_flops("SomeNewKernel", [(3, 4)], (3, 4), [True]) == (0, None)
    assert forward_flops("Permute", [(3, 4)], (4, 3)) == (0, 0)
    assert forward_flops("FusedGELU", [(3, 4)], (3, 4)) == forward_flops(
        "GELUFunction", [(3, 4)], (3, 4)
    )
    assert forward_flops("GELUFunction", [(3, 4)], (3, 4)) == (0, 8 * 12)
    assert backward_flops("GELUFunction", [(3, 4)], (3, 4), [True]) == (0, 12 * 12)
    assert backward_flops("Add", [(3, 4), (4,)], (3, 4), [True, True]) == (0, 0)  # passes g on
    assert backward_flops("Mul", [(3, 4), (3, 4)], (3, 4), [False, False]) == (0, 0)


def test_parameter_counts_group_by_layer_like_pytorch():
    model = gpt(**CONFIGS[1])
    ref = REF.case("parameters/tied")  # the torch.nn GPT's numel() sums
    blocks = parameter_counts(model, depth=2)
    assert blocks["blocks.0"] == ref["block0"]
    assert blocks["ln_f"] == ref["ln_f"]
    assert sum(blocks.values()) == count_parameters(model) == ref["total"]
    assert parameter_counts(model, depth=9)["blocks.0.attention.q_proj"] == 24 * 24 + 24
    with pytest.raises(ValueError, match="depth must be a whole number >= 1"):
        parameter_counts(model, depth=0)
