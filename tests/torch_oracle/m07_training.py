"""Module 07: gradient clipping and the warmup + cosine schedule, by PyTorch."""

import numpy as np
import torch

SCHEDULES = [(1e-3, 10, 100, 1e-4), (0.5, 3, 20, 0.0)]  # max_lr, warmup, total, min_lr


def _lrs(max_lr, warmup, total, min_lr, steps):
    """The schedule built from torch's own schedulers: LinearLR, then CosineAnnealingLR."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=max_lr)
    warm = torch.optim.lr_scheduler.LinearLR(
        opt, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1
    )
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=min_lr)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cosine], milestones=[warmup])
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return np.array(lrs)


def build(cases):
    for scale in (0.01, 1.0, 50.0):
        for max_norm in (0.5, 1.0, 1e3):
            rng = np.random.default_rng(0)
            shapes = [(6, 5), (5,), (3, 2)]
            arrays = [(rng.standard_normal(s) * scale).astype(np.float32) for s in shapes]
            params = [torch.zeros(a.shape, requires_grad=True) for a in arrays]
            for p, a in zip(params, arrays):
                p.grad = torch.from_numpy(a.copy())
            total = torch.nn.utils.clip_grad_norm_(params, max_norm)
            fields = {f"grad{j}": a for j, a in enumerate(arrays)}
            fields |= {f"clipped{j}": p.grad for j, p in enumerate(params)}
            cases.put(f"clip/{scale}/{max_norm}", seed=0, total=total, **fields)
    for i, (max_lr, warmup, total, min_lr) in enumerate(SCHEDULES):
        cases.put(f"schedule/{i}", lrs=_lrs(max_lr, warmup, total, min_lr, total + 1))
