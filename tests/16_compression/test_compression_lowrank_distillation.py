"""Low rank by SVD (Eckart-Young, torch's SVD) and the distillation loss (torch's KL and CE,
finite differences), then a half-size GPT distilled from a trained one."""

import copy

import numpy as np
import oracle
import pytest
from fdcheck import check_function

from tinytorch.compress.distillation import (
    DistillationLoss,
    distill_step,
    distillation_loss,
    half_size,
)
from tinytorch.compress.lowrank import LowRankLinear, factorize, low_rank, rank_for_energy
from tinytorch.compress.pruning import linears
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Linear
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import ShapeError, Tensor, precision
from tinytorch.core.transformer import GPT

# torch's svdvals and F.kl_div / F.cross_entropy, committed (tests/torch_oracle/m16_compression.py)
REF = oracle.load(__file__)


def test_low_rank_error_is_what_the_dropped_singular_values_hold(rng):
    linear = Linear(30, 20)
    linear.weight.data[...] = REF["svd/w"]
    s = REF["svd/singular_values"]  # torch.linalg.svdvals in float64
    for rank in (1, 4, 10, 19):
        factored = low_rank(linear, rank)
        error = np.sum((factored.weight.data.astype(np.float64) - linear.weight.data) ** 2)
        np.testing.assert_allclose(error, np.sum(s[rank:] ** 2), rtol=1e-4)
        assert factored.num_parameters() == rank * (30 + 20) + 20
    full = low_rank(linear, 20)
    x = rng.normal(size=(4, 30))
    np.testing.assert_allclose(full(x).data, linear(x).data, rtol=1e-4, atol=1e-5)


def test_low_rank_layer_trains_through_both_factors(rng):
    np.random.seed(1)
    factored = low_rank(Linear(6, 5), 2)
    x = Tensor(rng.normal(size=(3, 6)), requires_grad=True)
    factored(x).sum().backward()
    assert factored.first.weight.grad.shape == (6, 2) and factored.second.weight.grad.shape == (
        2,
        5,
    )
    assert len(factored.parameters()) == 3  # A, B and the bias


def test_rank_for_energy():
    w = np.diag([3.0, 2.0, 1.0, 0.0])
    assert rank_for_energy(w, 0.6) == 1  # 9 / 14 of the energy
    assert rank_for_energy(w, 0.9) == 2 and rank_for_energy(w, 1.0) == 3


def test_factorize_copies_a_gpt_and_keeps_it_working(rng):
    np.random.seed(2)
    gpt = GPT(vocab_size=20, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=8)
    slim = factorize(gpt, ratio=0.25)
    assert isinstance(slim.blocks[0].mlp.linear1, LowRankLinear)
    assert isinstance(slim.blocks[0].attention.q_proj, LowRankLinear)  # read through .weight
    assert isinstance(slim.lm_head, Linear)  # skipped by default
    assert all(type(m) is Linear for _, m in linears(gpt))  # the original is untouched
    assert slim.num_parameters() < 0.6 * gpt.num_parameters()
    tokens = rng.integers(0, 20, size=(2, 8))
    with no_grad():
        assert np.isfinite(slim(tokens).data).all()
    exact = factorize(gpt, ratio=0.99)  # nearly full rank: no layer would save numbers
    assert all(type(m) is Linear for _, m in linears(exact))


DISTILLATION = [(1.0, 0.5), (2.0, 0.9), (4.0, 0.0), (0.5, 1.0)]  # temperature, alpha


@pytest.mark.parametrize("i", range(len(DISTILLATION)))
def test_distillation_loss_and_gradient_equal_torch(i):
    # alpha * T^2 * F.kl_div(log_softmax(s / T), log_softmax(t / T), batchmean, log_target)
    # + (1 - alpha) * F.cross_entropy(s, y), and its gradient in the student's logits
    temperature, alpha = DISTILLATION[i]
    case = REF.case(f"distillation/{i}")
    assert (case["temperature"], case["alpha"]) == (temperature, alpha)
    with precision(np.float64):
        student = Tensor(case["student"], requires_grad=True)
        loss = distillation_loss(student, case["teacher"], case["targets"], temperature, alpha)
        loss.backward()
    np.testing.assert_allclose(loss.data, case["loss"], rtol=1e-10)
    np.testing.assert_allclose(student.grad, case["grad"], rtol=1e-8, atol=1e-12)


def test_distillation_backward_against_finite_differences(rng):
    s, t = rng.normal(size=(3, 4, 6)), rng.normal(size=(3, 4, 6))
    y = rng.integers(0, 6, size=(3, 4))
    kwargs = dict(teacher=t, targets=y, temperature=3.0, alpha=0.6)
    check_function(DistillationLoss, s, kwargs=kwargs)


def test_the_t_squared_factor_keeps_the_soft_gradient_in_scale(rng):
    s, t = rng.normal(size=(50, 10)), rng.normal(size=(50, 10))
    y = rng.integers(0, 10, size=50)
    norms = []
    for temperature in (4.0, 8.0, 16.0):
        with precision(np.float64):
            student = Tensor(s, requires_grad=True)
            distillation_loss(student, t, y, temperature, alpha=1.0).backward()
        norms.append(np.linalg.norm(student.grad))
    # without T^2 the gradient would shrink like 1/T^2 (16x over this range); with it, barely
    assert max(norms) / min(norms) < 1.5


def test_alpha_zero_is_the_hard_loss_and_a_perfect_student_has_no_soft_loss(rng):
    s, y = rng.normal(size=(4, 9)), rng.integers(0, 9, size=4)
    with precision(np.float64):
        hard = distillation_loss(s, rng.normal(size=(4, 9)), y, 2.0, alpha=0.0).data
        np.testing.assert_allclose(hard, cross_entropy(Tensor(s), y).data, rtol=1e-12)
        assert abs(distillation_loss(s, s, y, 3.0, alpha=1.0).data) < 1e-12


def test_a_distilled_half_size_gpt_moves_toward_its_teacher(rng):
    np.random.seed(3)
    teacher = GPT(vocab_size=12, embed_dim=16, num_layers=4, num_heads=2, max_seq_len=8)
    for p in teacher.parameters():  # a teacher with opinions: sharper than the init
        p.data *= 3 if p.ndim == 2 else 1
    student = half_size(teacher)
    assert len(student.blocks) == 2 and student.config.num_layers == 2
    assert student.blocks[1] is not teacher.blocks[2]  # copies, not shared
    np.testing.assert_array_equal(
        student.blocks[1].ln1.gamma.data, teacher.blocks[2].ln1.gamma.data
    )
    x = rng.integers(0, 12, size=(8, 8))
    y = np.roll(x, -1, axis=1)
    with no_grad():
        target = teacher(x).data
    before = float(distillation_loss(student(x).data, target, y, 2.0, 1.0).data)
    optimizer = AdamW(student.parameters(), lr=3e-3)
    first = copy.deepcopy(student.state_dict())
    losses = [distill_step(student, teacher, x, y, optimizer, 2.0, 1.0) for _ in range(30)]
    assert losses[0] == pytest.approx(before, rel=1e-5)
    assert losses[-1] < 0.7 * losses[0]
    assert any(not np.array_equal(v, student.state_dict()[k]) for k, v in first.items())


def test_bad_input_is_one_clear_error():
    with pytest.raises(ShapeError, match="must agree"):
        distillation_loss(np.zeros((2, 3)), np.zeros((2, 4)), np.zeros(2, int))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        distillation_loss(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros(2, int), temperature=0)
    with pytest.raises(ValueError, match="rank must be a whole number in"):
        low_rank(Linear(4, 3), 4)
    with pytest.raises(ValueError, match="ratio is the share"):
        factorize(Linear(4, 3), ratio=1.5)
