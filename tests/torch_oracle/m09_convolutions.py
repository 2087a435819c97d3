"""Module 09: conv2d, pooling, unfold, flatten and BatchNorm2d, by PyTorch (float64)."""

import numpy as np
import torch
import torch.nn.functional as F

# tests/09_convolutions/test_convolutions_conv.py: (N, C, H, W), out channels, kernel, stride,
# padding, bias; the position names the case
CONV = [
    ((2, 1, 8, 8), 4, (3, 3), (1, 1), (0, 0), True),
    ((3, 3, 7, 5), 2, (3, 2), (2, 1), (1, 0), True),
    ((1, 2, 6, 9), 5, (1, 4), (1, 3), (0, 2), False),
    ((2, 4, 5, 5), 3, (5, 5), (2, 2), (2, 2), True),
    ((4, 1, 9, 6), 1, (2, 3), (3, 2), (1, 1), False),
]
# test_convolutions_pool.py: (N, C, H, W), kernel, stride (None: the kernel), padding
POOL = [
    ((2, 1, 8, 8), 2, None, 0),
    ((1, 3, 7, 9), (3, 2), (2, 1), (1, 1)),
    ((3, 2, 5, 6), 3, 2, 1),
    ((2, 4, 6, 5), (1, 3), (1, 2), (0, 1)),
]


def _pool(kind, x, kernel, stride, padding, grad):
    tx = torch.tensor(x, requires_grad=True)
    pool = F.max_pool2d if kind == "max" else F.avg_pool2d
    out = pool(tx, kernel, stride=stride, padding=padding)
    out.backward(torch.tensor(grad))
    return out, tx.grad


def _conv_cases(cases):
    for i, (shape, out, kernel, stride, padding, bias) in enumerate(CONV):
        seed = sum(shape) + out
        rng = np.random.default_rng(seed)
        bound = 1 / np.sqrt(shape[1] * kernel[0] * kernel[1])
        x = rng.standard_normal(shape)
        w = rng.uniform(-bound, bound, (out, shape[1], *kernel))
        tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        fields = {"x": x, "w": w}
        tb = None
        if bias:
            fields["b"] = rng.uniform(-bound, bound, out)
            tb = torch.tensor(fields["b"], requires_grad=True)
        y = F.conv2d(tx, tw, tb, stride=stride, padding=padding)
        grad = rng.standard_normal(tuple(y.shape))
        y.backward(torch.tensor(grad))
        fields |= {"grad": grad, "y": y, "grad_x": tx.grad, "grad_w": tw.grad}
        if bias:
            fields["grad_b"] = tb.grad
        cases.put(f"conv/{i}", seed=seed, **fields)

    rng = np.random.default_rng(5)
    bound = 1 / np.sqrt(3 * 9)
    x = rng.standard_normal((4, 3, 10, 10)).astype(np.float32)
    w = rng.uniform(-bound, bound, (8, 3, 3, 3)).astype(np.float32)
    b = rng.uniform(-bound, bound, 8).astype(np.float32)
    y = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1)
    cases.put("conv_float32", seed=5, x=x, w=w, b=b, y=y)

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 7))
    unfolded = F.unfold(torch.tensor(x), (3, 2), padding=(1, 2), stride=(2, 3))  # (N, C*kh*kw, L)
    cases.put("unfold", seed=3, x=x, unfolded=unfolded)


def _pool_cases(cases):
    for i, (shape, kernel, stride, padding) in enumerate(POOL):
        for kind in ("max", "avg"):
            rng = np.random.default_rng(sum(shape))
            x = rng.standard_normal(shape)
            pool = F.max_pool2d if kind == "max" else F.avg_pool2d
            size = tuple(pool(torch.tensor(x), kernel, stride=stride, padding=padding).shape)
            grad = rng.standard_normal(size)
            y, gx = _pool(kind, x, kernel, stride, padding, grad)
            cases.put(f"pool/{kind}/{i}", seed=sum(shape), x=x, grad=grad, y=y, grad_x=gx)

    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = 1.0  # two winners in the first window
    cases.put("pool_ties", x=x, grad_x=_pool("max", x, 2, None, 0, np.ones((1, 1, 2, 2)))[1])

    x = torch.zeros(2, 3, 4, 5)
    for start, end in ((1, -1), (0, 1), (2, 3), (1, 2)):
        cases.put(f"flatten/{start}/{end}", shape=tuple(torch.flatten(x, start, end).shape))


def _batchnorm_cases(cases):
    for shape in [(4, 3, 5, 2), (2, 1, 3, 3), (8, 5, 1, 1)]:
        c = shape[1]
        rng = np.random.default_rng(c)
        weight, bias = rng.uniform(0.5, 2.0, c), rng.standard_normal(c)
        ref = torch.nn.BatchNorm2d(c, eps=1e-5, momentum=0.3).double()
        with torch.no_grad():
            ref.weight.copy_(torch.tensor(weight))
            ref.bias.copy_(torch.tensor(bias))
        name = "batchnorm/" + "x".join(map(str, shape))
        cases.put(name, seed=c, weight=weight, bias=bias)
        for step in range(3):
            x = rng.standard_normal(shape) * (step + 1) + step
            grad = rng.standard_normal(shape)
            tx = torch.tensor(x, requires_grad=True)
            ref.zero_grad()
            y = ref(tx)
            y.backward(torch.tensor(grad))
            cases.put(f"{name}/step{step}", x=x, grad=grad, y=y, grad_x=tx.grad)
            cases.put(f"{name}/step{step}", grad_weight=ref.weight.grad, grad_bias=ref.bias.grad)
            cases.put(f"{name}/step{step}", mean=ref.running_mean, var=ref.running_var)
        ref.eval()
        x, grad = rng.standard_normal((2, *shape[1:])), rng.standard_normal((2, *shape[1:]))
        tx = torch.tensor(x, requires_grad=True)
        y = ref(tx)
        y.backward(torch.tensor(grad))
        cases.put(f"{name}/eval", x=x, grad=grad, y=y, grad_x=tx.grad)


def build(cases):
    _conv_cases(cases)
    _pool_cases(cases)
    _batchnorm_cases(cases)
