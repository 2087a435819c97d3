"""Module 03: Linear against torch.nn.functional.linear and torch.nn.Linear."""

import numpy as np
import torch


def build(cases):
    for shape in [(5, 7), (2, 3, 7), (2, 2, 3, 7), (7,)]:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((7, 4)).astype(np.float32)
        b = rng.standard_normal(4).astype(np.float32)
        g = rng.standard_normal((*shape[:-1], 4)).astype(np.float32)
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w.T.copy(), b))
        out = torch.nn.functional.linear(tx, tw, tb)  # torch keeps the weight as (out, in)
        out.backward(torch.tensor(g))
        label = "x".join(map(str, shape))
        cases.put(f"linear/{label}", seed=0, x=x, w=w, b=b, g=g, out=out)
        cases.put(f"linear/{label}", grad_x=tx.grad, grad_w=tw.grad.T, grad_b=tb.grad)

    rng = np.random.default_rng(4)
    weight = rng.uniform(-1, 1, size=(6, 3)).astype(np.float32) / np.sqrt(6)  # (in, out)
    bias = rng.uniform(-1, 1, size=3).astype(np.float32) / np.sqrt(6)
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    ref = torch.nn.Linear(6, 3)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(weight.T))
        ref.bias.copy_(torch.tensor(bias))
    cases.put("module", seed=4, weight=weight, bias=bias, x=x, out=ref(torch.tensor(x)))
