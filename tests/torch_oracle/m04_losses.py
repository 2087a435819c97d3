"""Module 04: the losses' values and gradients, by PyTorch."""

import numpy as np
import torch
import torch.nn.functional as F


def _grads(fn, *arrays):
    """PyTorch's value and gradient of the first input (of the sum, for a non-scalar result)."""
    ref = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ref)
    (out if out.numel() == 1 else out.sum()).backward()
    return out, ref[0].grad


def _ce(logits, targets, ignore_index=-100, grad=1.0):
    z = torch.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(
        z.reshape(-1, logits.shape[-1]),
        torch.tensor(targets.reshape(-1), dtype=torch.long),
        ignore_index=ignore_index,
    )
    loss.backward(torch.tensor(grad))
    return {"logits": logits, "targets": targets, "loss": loss, "grad": z.grad}


def build(cases):
    # test_losses_pytorch_names.py
    rng = np.random.default_rng(0)
    for dim in (-1, 0, 1):
        x = rng.normal(scale=4.0, size=(3, 5)).astype(np.float32)
        out, grad = _grads(lambda t, dim=dim: F.log_softmax(t, dim=dim), x)
        cases.put(f"log_softmax{dim}", x=x, out=out, grad=grad)
    p = rng.uniform(0.02, 0.98, size=(4, 3)).astype(np.float32)
    t = (rng.uniform(size=(4, 3)) > 0.5).astype(np.float32)
    out, grad = _grads(lambda a, b: torch.nn.BCELoss()(a, b), p, t)
    cases.put("bce", p=p, t=t, out=out, grad=grad)
    p, t = np.array([0.0, 1.0, 0.5], np.float32), np.array([1.0, 0.0, 1.0], np.float32)
    cases.put("bce_clamped", p=p, t=t, out=F.binary_cross_entropy(torch.tensor(p), torch.tensor(t)))
    z = rng.normal(scale=30.0, size=(5, 2)).astype(np.float32)  # beyond exp's range in float32
    t = (rng.uniform(size=(5, 2)) > 0.5).astype(np.float32)
    out, grad = _grads(lambda a, b: torch.nn.BCEWithLogitsLoss()(a, b), z, t)
    cases.put("bce_logits", z=z, t=t, out=out, grad=grad)

    # test_losses_torch.py
    for lead in [(), (6,), (2, 5), (2, 3, 4)]:
        rng = np.random.default_rng(len(lead))
        logits = (2 * rng.standard_normal((*lead, 11))).astype(np.float32)
        targets = rng.integers(0, 11, size=lead)
        cases.put(f"ce/{len(lead)}", seed=len(lead), **_ce(logits, targets, grad=0.7))

    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, 7, 13)).astype(np.float32)
    targets = rng.integers(0, 13, size=(3, 7))
    targets[0, 4:] = targets[2, 1:] = -100  # padded tails of shorter sequences
    cases.put("ce_ignore", seed=1, **_ce(logits, targets, ignore_index=-100))

    logits = np.random.default_rng(2).standard_normal((8, 4)).astype(np.float32)
    targets = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    cases.put("ce_ignore_class0", seed=2, **_ce(logits, targets, ignore_index=0))

    logits = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, 1e4], [-1e4, 0.0, 1e4]], dtype=np.float32)
    cases.put("ce_large", **_ce(logits, np.array([1, 0, 2])))

    rng = np.random.default_rng(4)
    logits = rng.standard_normal((4, 6, 9)).astype(np.float32)
    targets = rng.integers(0, 9, size=(4, 6))
    targets[1, 3] = 7
    cases.put("ce_entry_points", seed=4, **_ce(logits, targets, ignore_index=7))

    for shape in [(5,), (3, 4), (2, 3, 4)]:
        rng = np.random.default_rng(len(shape))
        p = rng.standard_normal(shape).astype(np.float32)
        t = rng.standard_normal(shape).astype(np.float32)
        tp, tt = torch.tensor(p, requires_grad=True), torch.tensor(t, requires_grad=True)
        loss = F.mse_loss(tp, tt)
        loss.backward(torch.tensor(1.3))
        label = "x".join(map(str, shape))
        cases.put(f"mse/{label}", seed=len(shape), p=p, t=t, loss=loss)
        cases.put(f"mse/{label}", grad_p=tp.grad, grad_t=tt.grad)
