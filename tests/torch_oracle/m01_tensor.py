"""Module 01: the local backward rules of the tensor operations, by PyTorch's autograd."""

import numpy as np
import torch

# name -> (torch function, input shapes); tests/01_tensor/test_tensor_torch.py pairs each name
# with the tinytorch Function and its keyword arguments
OPS = {
    "mul": (lambda a, b: a * b, [(3, 4), (4,)]),
    "div": (lambda a, b: a / b, [(3, 4), (3, 1)]),
    "matmul": (lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "dot": (lambda a, b: a @ b, [(4,), (4,)]),
    "pow": (lambda a: a**2.5, [(3, 4)]),
    "sum": (lambda a: a.sum(dim=(0, 2)), [(2, 3, 4)]),
    "mean": (lambda a: a.mean(dim=1, keepdim=True), [(2, 3, 4)]),
    "max": (lambda a: a.amax(dim=-1), [(2, 3, 4)]),
}


def build(cases):
    for name, (torch_fn, shapes) in OPS.items():
        rng = np.random.default_rng(4)
        arrays = [rng.uniform(0.5, 2.0, size=s).astype(np.float32) for s in shapes]
        inputs = [torch.tensor(a, requires_grad=True) for a in arrays]
        out = torch_fn(*inputs)
        weight = rng.standard_normal(tuple(out.shape)).astype(np.float32)
        (out * torch.tensor(weight)).sum().backward()
        fields = {f"input{i}": a for i, a in enumerate(arrays)}
        fields |= {f"grad{i}": t.grad for i, t in enumerate(inputs)}
        cases.put(name, seed=4, weight=weight, out=out, **fields)

    # which tensors PyTorch gives a grad_fn (test_tensor_pytorch_names.py)
    leaf = torch.ones(3, requires_grad=True)
    made = leaf * 2 + 1
    cases.put(
        "grad_fn",
        leaf_has_one=leaf.grad_fn is not None,
        leaf_is_leaf=leaf.is_leaf,
        result_has_one=made.grad_fn is not None,
        result_is_leaf=made.is_leaf,
        untracked_has_one=torch.ones(2).mul(3).grad_fn is not None,
    )

    # a comparison used as a mask selects, and only the selected elements get a gradient
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    picked = tx[tx > 0]
    weight = rng.standard_normal(tuple(picked.shape)).astype(np.float32)
    (picked * torch.tensor(weight)).sum().backward()
    cases.put("mask", seed=5, x=x, weight=weight, out=picked, grad=tx.grad)

    # x ** 0 is the constant 1: its gradient is 0, also at x = 0
    zero = torch.tensor([0.0, 1.0, -2.0], requires_grad=True)
    (zero**0).sum().backward()
    cases.put("pow_zero", x=zero.detach(), grad=zero.grad)

    # the truth of a one-value tensor; many values raise
    try:
        bool(torch.ones(2))
        many_raise = False
    except RuntimeError:
        many_raise = True
    cases.put(
        "truth",
        zero=bool(torch.tensor([0.0])),
        five_below_one=bool(torch.tensor(5.0) < 1.0),
        many_raise=many_raise,
    )
