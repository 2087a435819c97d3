"""Every Tensor operation through the engine, on random shapes: finite differences and PyTorch.

PyTorch's answers, on shapes drawn from stated seeds, are committed in torch_reference.npz
(tests/torch_oracle/m05_autograd.py); hypothesis draws the finite-difference checks' shapes.
"""

import numpy as np
import oracle
import pytest
from fdcheck import check_graph
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

from tinytorch.core.tensor import Tensor, precision

REF = oracle.load(__file__)
shapes = array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)

# name: (tinytorch op, inputs must be positive); `axis` is drawn per example
UNARY = {
    "neg": (lambda a, axis: -a, False),
    "pow": (lambda a, axis: a**3, False),
    "pow_fraction": (lambda a, axis: a**1.5, True),
    "exp": (lambda a, axis: a.exp(), False),
    "log": (lambda a, axis: a.log(), True),
    "sqrt": (lambda a, axis: a.sqrt(), True),
    "sum": (lambda a, axis: a.sum(axis=axis), False),
    "sum_all": (lambda a, axis: a.sum(), False),
    "mean_keepdims": (lambda a, axis: a.mean(axis=axis, keepdims=True), False),
    "max": (lambda a, axis: a.max(axis=axis), False),
    "var": (lambda a, axis: a.var(axis=axis), False),
    "std": (lambda a, axis: a.std(axis=axis, keepdims=True), False),
    "reshape": (lambda a, axis: a.reshape(-1, 1), False),
    "permute": (lambda a, axis: a.permute(*reversed(range(a.ndim))), False),
    "transpose": (lambda a, axis: a.transpose(0, axis), False),
    # repeated rows must accumulate their gradients
    "getitem_repeated": (lambda a, axis: a[np.array([0, a.shape[0] - 1, 0])], False),
    "getitem_slice": (lambda a, axis: a[..., ::2], False),
}

BINARY = {
    "add": (lambda a, b: a + b, False),
    "sub": (lambda a, b: a - b, False),
    "mul": (lambda a, b: a * b, False),
    "div": (lambda a, b: a / b, True),
}


def _inputs(rng, shape, positive):
    return rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)


def _compare_with_torch(build, case):
    """Forward values and every input gradient of `build` against PyTorch's, in float64."""
    arrays = [case[f"input{i}"] for i in range(sum(k.startswith("input") for k in case))]
    with precision(np.float64):
        ours = [Tensor(a, requires_grad=True) for a in arrays]
        out = build(*ours)
        weight = np.random.default_rng(0).standard_normal(out.shape)
        (out * Tensor(weight)).sum().backward()
    np.testing.assert_allclose(out.data, case["out"], rtol=1e-10, atol=1e-12)
    for i, mine in enumerate(ours):
        np.testing.assert_allclose(mine.grad, case[f"grad{i}"], rtol=1e-9, atol=1e-12)


def _trailing_broadcast(data, shape):
    """A shape that broadcasts against `shape`: a suffix of it, some sides set to 1."""
    keep = data.draw(st.integers(0, len(shape)))
    suffix = shape[len(shape) - keep :]
    return tuple(1 if data.draw(st.booleans()) else n for n in suffix)


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=15, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), data=st.data())
def test_unary_ops_match_finite_differences(name, shape, seed, data):
    op, positive = UNARY[name]
    if name == "transpose" and len(shape) == 1:  # a transpose needs two axes
        shape = (2, *shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    if name == "std":  # the std of one value is 0, where sqrt has no derivative: reduce >= 2
        shape = tuple(max(n, 2) if i == axis % len(shape) else n for i, n in enumerate(shape))
    x = _inputs(np.random.default_rng(seed), shape, positive)
    check_graph(lambda a: op(a, axis), x)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops_match_torch(name):
    op, _ = UNARY[name]
    for case in REF.cases(f"unary/{name}"):
        axis = int(case["axis"])
        _compare_with_torch(lambda a, axis=axis: op(a, axis), case)


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=15, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), data=st.data())
def test_broadcasting_binary_ops_match_finite_differences(name, shape, seed, data):
    op, positive = BINARY[name]
    rng = np.random.default_rng(seed)
    other = _trailing_broadcast(data, shape)
    a, b = rng.standard_normal(shape), _inputs(rng, other, positive)
    if data.draw(st.booleans()) and not positive:  # the smaller operand on the left as well
        a, b = b, a
    check_graph(op, a, b)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_broadcasting_binary_ops_match_torch(name):
    op, _ = BINARY[name]
    for case in REF.cases(f"binary/{name}"):
        _compare_with_torch(op, case)


@settings(max_examples=20, deadline=None)
@given(
    batch=st.lists(st.integers(1, 3), max_size=2).map(tuple),
    n=st.integers(1, 4),
    k=st.integers(1, 4),
    m=st.integers(1, 4),
    weight_batched=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_batched_matmul_matches_finite_differences(batch, n, k, m, weight_batched, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, k))
    b = rng.standard_normal((batch if weight_batched else ()) + (k, m))
    check_graph(lambda x, w: x @ w, a, b)


def test_batched_matmul_matches_torch():
    for case in REF.cases("matmul"):
        _compare_with_torch(lambda x, w: x @ w, case)
