"""Module 05: the engine's gradients of whole graphs, by PyTorch's autograd (float64)."""

import numpy as np
import torch

EXAMPLES = 8  # random shapes per operation (the finite-difference checks draw their own)

# name: (torch op, inputs must be positive); tests/05_autograd/test_autograd_ops.py has tinytorch's
UNARY = {
    "neg": (lambda a, axis: -a, False),
    "pow": (lambda a, axis: a**3, False),
    "pow_fraction": (lambda a, axis: a**1.5, True),
    "exp": (lambda a, axis: a.exp(), False),
    "log": (lambda a, axis: a.log(), True),
    "sqrt": (lambda a, axis: a.sqrt(), True),
    "sum": (lambda a, axis: a.sum(dim=axis), False),
    "sum_all": (lambda a, axis: a.sum(), False),
    "mean_keepdims": (lambda a, axis: a.mean(dim=axis, keepdim=True), False),
    "max": (lambda a, axis: a.amax(dim=axis), False),
    "var": (lambda a, axis: a.var(dim=axis, correction=0), False),
    "std": (lambda a, axis: a.std(dim=axis, correction=0, keepdim=True), False),
    "reshape": (lambda a, axis: a.reshape(-1, 1), False),
    "permute": (lambda a, axis: a.permute(*reversed(range(a.ndim))), False),
    "transpose": (lambda a, axis: a.transpose(0, axis), False),
    "getitem_repeated": (lambda a, axis: a[torch.tensor([0, a.shape[0] - 1, 0])], False),
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


def _shape(rng, min_dims=1):
    return tuple(int(n) for n in rng.integers(1, 5, size=rng.integers(min_dims, 4)))


def _run(torch_build, arrays, seed=0):
    """Forward values and every input gradient, of the sum weighted by a seeded normal draw."""
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = torch_build(*theirs)
    weight = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    (out * torch.as_tensor(weight)).sum().backward()
    fields = {f"input{i}": a for i, a in enumerate(arrays)}
    return fields | {f"grad{i}": t.grad for i, t in enumerate(theirs)} | {"out": out}


def build(cases):
    for k, (name, (op, positive)) in enumerate(sorted(UNARY.items())):
        for i in range(EXAMPLES):
            seed = 1000 * k + i
            rng = np.random.default_rng(seed)
            shape = _shape(rng, 2 if name == "transpose" else 1)  # a transpose needs two axes
            axis = int(rng.integers(-len(shape), len(shape)))
            if name == "std":  # the std of one value is 0, where sqrt has no derivative
                shape = tuple(
                    max(n, 2) if j == axis % len(shape) else n for j, n in enumerate(shape)
                )
            x = _inputs(rng, shape, positive)
            fields = _run(lambda a, op=op, axis=axis: op(a, axis), [x])
            cases.put(f"unary/{name}/{i}", seed=seed, axis=axis, **fields)

    for k, (name, (op, positive)) in enumerate(sorted(BINARY.items())):
        for i in range(EXAMPLES):
            seed = 1000 * k + i
            rng = np.random.default_rng(seed)
            shape = _shape(rng)
            keep = int(rng.integers(0, len(shape) + 1))  # a suffix of the shape, some sides 1
            other = tuple(1 if rng.random() < 0.5 else n for n in shape[len(shape) - keep :])
            a, b = rng.standard_normal(shape), _inputs(rng, other, positive)
            if rng.random() < 0.5 and not positive:  # the smaller operand on the left as well
                a, b = b, a
            cases.put(f"binary/{name}/{i}", seed=seed, **_run(op, [a, b]))

    for i in range(2 * EXAMPLES):
        rng = np.random.default_rng(i)
        batch = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 3)))
        n, k, m = (int(v) for v in rng.integers(1, 5, size=3))
        a = rng.standard_normal(batch + (n, k))
        b = rng.standard_normal((batch if rng.random() < 0.5 else ()) + (k, m))
        cases.put(f"matmul/{i}", seed=i, **_run(lambda x, w: x @ w, [a, b]))

    # test_autograd_engine.py: a graph that uses one node twice
    rng = np.random.default_rng(2)
    x, w = (
        rng.standard_normal((5, 4)).astype(np.float32),
        rng.standard_normal((4, 3)).astype(np.float32),
    )
    px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    py = px @ pw
    ((py * py + py).mean() + (px**2).sum() * 0.01).backward()
    cases.put("shared", seed=2, x=x, w=w, grad_x=px.grad, grad_w=pw.grad)

    # test_autograd_layers.py: cross-entropy of a float64 linear layer
    rng = np.random.default_rng(2)
    weight, bias = rng.uniform(-0.5, 0.5, (4, 3)), rng.uniform(-0.5, 0.5, 3)
    x, targets = rng.standard_normal((5, 4)), np.array([0, 1, 2, 0, 1])
    w, b = torch.tensor(weight, requires_grad=True), torch.tensor(bias, requires_grad=True)
    torch.nn.functional.cross_entropy(torch.tensor(x) @ w + b, torch.tensor(targets)).backward()
    cases.put("linear_ce", seed=2, weight=weight, bias=bias, x=x, targets=targets)
    cases.put("linear_ce", grad_weight=w.grad, grad_bias=b.grad)

    # test_autograd_engine.py: a second backward through a freed graph raises; its nodes stay
    # no leaves
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (a * a).sum()
    y.backward()
    try:
        y.backward()
        again_raises = False
    except RuntimeError:
        again_raises = True
    h = a * a
    h.sum().backward()
    try:
        (h * 3).sum().backward()
        through_raises = False
    except RuntimeError:
        through_raises = True
    cases.put(
        "freed",
        again_raises=again_raises,
        through_raises=through_raises,
        used_is_leaf=y.is_leaf or h.is_leaf,
        grad_a=a.grad,
    )
