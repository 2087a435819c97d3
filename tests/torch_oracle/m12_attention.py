"""Module 12: scaled dot-product attention and torch.nn.MultiheadAttention, by PyTorch."""

import numpy as np
import torch

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _causal(steps):
    return np.triu(np.full((steps, steps), -np.inf, dtype=np.float32), k=1)


def _padding(lengths, steps):
    keep = np.arange(steps) < np.array(lengths)[:, None]
    return np.where(keep, 0.0, -np.inf).astype(np.float32)[:, None, None, :], keep


def _sdpa(cases):
    for masking in ("causal", "padding"):
        rng = np.random.default_rng(3)
        batch, heads, steps, dim = 4, 3, 16, 8
        shape = (batch, heads, steps, dim)
        q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
        mask = _causal(steps) if masking == "causal" else _padding([16, 9, 1, 12], steps)[0]
        upstream = rng.standard_normal(shape).astype(np.float32)
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        out = torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=torch.tensor(mask)
        )
        (out * torch.tensor(upstream)).sum().backward()
        cases.put(f"sdpa/{masking}", seed=3, q=q, k=k, v=v, mask=mask, upstream=upstream, out=out)
        cases.put(f"sdpa/{masking}", grad_q=tq.grad, grad_k=tk.grad, grad_v=tv.grad)


def _weights(rng, embed_dim, bias):
    """Our (in, out) layout, uniform as nn.Linear draws them."""
    bound = 1 / np.sqrt(embed_dim)
    found = {}
    for name in PROJECTIONS:
        found[f"{name}.weight"] = rng.uniform(-bound, bound, (embed_dim, embed_dim))
        if bias:
            found[f"{name}.bias"] = rng.uniform(-bound, bound, embed_dim)
    return {k: v.astype(np.float32) for k, v in found.items()}


def _module(weights, embed_dim, heads, bias):
    """torch.nn.MultiheadAttention holding `weights`: torch stores (out, in), rows q, k, v."""
    ref = torch.nn.MultiheadAttention(embed_dim, heads, bias=bias, batch_first=True)
    with torch.no_grad():
        qkv = [weights[f"{n}.weight"].T for n in PROJECTIONS[:3]]
        ref.in_proj_weight.copy_(torch.tensor(np.concatenate(qkv)))
        ref.out_proj.weight.copy_(torch.tensor(weights["out_proj.weight"].T))
        if bias:
            biases = [weights[f"{n}.bias"] for n in PROJECTIONS[:3]]
            ref.in_proj_bias.copy_(torch.tensor(np.concatenate(biases)))
            ref.out_proj.bias.copy_(torch.tensor(weights["out_proj.bias"]))
    return ref


def _grads(ref, embed_dim):
    """torch's parameter gradients in our (in, out) layout, named as ours."""
    e = embed_dim
    found = {}
    for i, name in enumerate(PROJECTIONS[:3]):
        found[f"grad.{name}.weight"] = ref.in_proj_weight.grad[i * e : (i + 1) * e].T
        if ref.in_proj_bias is not None:
            found[f"grad.{name}.bias"] = ref.in_proj_bias.grad[i * e : (i + 1) * e]
    found["grad.out_proj.weight"] = ref.out_proj.weight.grad.T
    if ref.out_proj.bias is not None:
        found["grad.out_proj.bias"] = ref.out_proj.bias.grad
    return found


def _multihead(cases):
    for masking in ("causal", "padding"):
        rng = np.random.default_rng(2)
        batch, steps, e, h = 3, 10, 16, 4
        weights = _weights(rng, e, bias=True)
        ref = _module(weights, e, h, bias=True)
        x = rng.standard_normal((batch, steps, e)).astype(np.float32)
        upstream = rng.standard_normal((batch, steps, e)).astype(np.float32)
        if masking == "causal":
            masks = {"attn_mask": torch.tensor(_causal(steps))}
        else:
            masks = {"key_padding_mask": torch.tensor(~_padding([10, 6, 1], steps)[1])}
        tx = torch.tensor(x, requires_grad=True)
        out, attention = ref(tx, tx, tx, need_weights=True, average_attn_weights=False, **masks)
        (out * torch.tensor(upstream)).sum().backward()
        name = f"self/{masking}"
        cases.put(name, seed=2, x=x, upstream=upstream, out=out, attention=attention)
        cases.put(name, grad_x=tx.grad, **weights, **_grads(ref, e))

    rng = np.random.default_rng(3)
    weights = _weights(rng, 8, bias=False)
    ref = _module(weights, 8, 2, bias=False)
    x, memory = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 8), (2, 7, 8)))
    upstream = rng.standard_normal((2, 4, 8)).astype(np.float32)
    keep = np.arange(7) < np.array([7, 3])[:, None]
    tx, tm = torch.tensor(x, requires_grad=True), torch.tensor(memory, requires_grad=True)
    out, _ = ref(tx, tm, tm, key_padding_mask=torch.tensor(~keep))
    (out * torch.tensor(upstream)).sum().backward()
    cases.put("cross", seed=3, x=x, memory=memory, upstream=upstream, out=out)
    cases.put("cross", grad_x=tx.grad, grad_memory=tm.grad, **weights, **_grads(ref, 8))


def build(cases):
    _sdpa(cases)
    _multihead(cases)
