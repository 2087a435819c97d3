"""Tensor.grad_fn and is_leaf, read the way PyTorch code reads them."""

import numpy as np
import oracle

from tinytorch.core.tensor import Function, Tensor

TORCH = oracle.load(__file__).case("grad_fn")  # what PyTorch answers for the same tensors


def test_grad_fn_is_the_function_that_made_the_tensor_and_none_for_leaves():
    a = Tensor(np.ones(3), requires_grad=True)
    b = a * 2 + 1
    assert (a.grad_fn is not None) == TORCH["leaf_has_one"] and a.is_leaf == TORCH["leaf_is_leaf"]
    assert (b.grad_fn is not None) == TORCH["result_has_one"]
    assert b.is_leaf == TORCH["result_is_leaf"] and not b.is_leaf
    assert isinstance(b.grad_fn, Function) and b.grad_fn is b._ctx
    doubled = b.grad_fn.parents[0]  # b = (a * 2) + 1: walk the graph back to a
    assert doubled.grad_fn is not None and doubled.grad_fn.parents[0] is a


def test_no_grad_fn_without_requires_grad():
    c = Tensor(np.ones(2)) * 3
    assert c.grad_fn is None and c.is_leaf
    assert not TORCH["untracked_has_one"]
