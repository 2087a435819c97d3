"""Module 06: torch.optim's steps on stated parameters and gradients."""

import numpy as np
import torch

SHAPES = [(4, 3), (3,), (2, 5, 2)]
# tests/06_optimizers/test_optimizers_torch.py pairs each with tinytorch's class, by position
CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "weight_decay": 0.3}),
    ("Adam", {}),
    ("Adam", {"lr": 0.01, "betas": (0.5, 0.9), "eps": 1e-6}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1}),
    ("AdamW", {}),
    ("AdamW", {"lr": 0.02, "betas": (0.8, 0.95), "weight_decay": 0.1}),
]
HYPERPARAMETERS = 16  # random Adam/AdamW settings, drawn from seeds 0..15


def _run(name, kwargs, steps=6, seed=0, lr_at=None, skip=()):
    """Start values, every step's gradients (zeros where `skip`ped) and torch's end values."""
    rng = np.random.default_rng(seed)
    start = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    params = [torch.tensor(v, requires_grad=True) for v in start]
    opt = getattr(torch.optim, name)(params, **kwargs)
    fields = {f"start{j}": v for j, v in enumerate(start)}
    for step in range(steps):
        if lr_at is not None:
            opt.param_groups[0]["lr"] = lr_at(step)
        for j, p in enumerate(params):
            if j in skip:
                p.grad = None
                continue
            scale = 1.0 if skip else rng.uniform(0.01, 10)
            g = (rng.standard_normal(p.shape) * scale).astype(np.float32)
            p.grad = torch.from_numpy(g.copy())
            fields[f"grad{step}_{j}"] = g
        opt.step()
    return fields | {f"end{j}": p for j, p in enumerate(params)} | {"seed": seed}


def build(cases):
    for i, (name, kwargs) in enumerate(CASES):
        cases.put(f"steps/{i}", **_run(name, kwargs))
        base = kwargs.get("lr", 1e-3)
        lr_fields = _run(name, kwargs, lr_at=lambda s, base=base: base * (1 + s) / 6)
        cases.put(f"lr_between/{i}", **lr_fields)
        cases.put(f"frozen/{i}", **_run(name, kwargs, steps=3, seed=1, skip=(1,)))

    for i in range(HYPERPARAMETERS):
        rng = np.random.default_rng(i)
        lr, beta1, beta2 = rng.uniform(1e-4, 0.5), rng.uniform(0.0, 0.99), rng.uniform(0.5, 0.9999)
        weight_decay, decoupled = rng.uniform(0.0, 0.5), bool(rng.random() < 0.5)
        kwargs = {"lr": lr, "betas": (beta1, beta2), "weight_decay": weight_decay}
        fields = _run("AdamW" if decoupled else "Adam", kwargs, steps=4, seed=100 + i)
        cases.put(f"any/{i}", lr=lr, betas=(beta1, beta2), weight_decay=weight_decay, **fields)
        cases.put(f"any/{i}", decoupled=decoupled)

    # test_optimizers_pytorch_names.py: a decay written over param_groups; Adam's state
    for name in ("SGD", "Adam"):
        rng = np.random.default_rng(0)
        start = [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=2).astype(np.float32)]
        params = [torch.tensor(a.copy(), requires_grad=True) for a in start]
        opt = getattr(torch.optim, name)(params, lr=0.1)
        fields = {f"start{j}": a for j, a in enumerate(start)}
        for step in range(4):
            for j, p in enumerate(params):
                g = rng.normal(size=p.shape).astype(np.float32)
                p.grad = torch.from_numpy(g.copy())
                fields[f"grad{step}_{j}"] = g
            opt.step()
            for group in opt.param_groups:  # the torch idiom
                group["lr"] *= 0.5
        ends = {f"end{j}": p for j, p in enumerate(params)}
        cases.put(f"decay/{name}", seed=0, lr=opt.param_groups[0]["lr"], **fields, **ends)

    rng = np.random.default_rng(0)
    start = [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=2).astype(np.float32)]
    params = [torch.tensor(a.copy(), requires_grad=True) for a in start]
    opt = torch.optim.Adam(params, lr=0.01)
    for p in params:
        p.grad = torch.from_numpy(rng.normal(size=p.shape).astype(np.float32))
    opt.step()
    for j, p in enumerate(params):  # the shapes of the non-scalar state: exp_avg, exp_avg_sq
        shapes = sorted(tuple(v.shape) for v in opt.state[p].values() if v.ndim)
        cases.put(f"adam_state/{j}", moment_shapes=np.array(shapes))
