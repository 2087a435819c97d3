"""Module 18: what the fused kernels and an accelerated GPT and Adam must equal, by PyTorch."""

import numpy as np
import torch
import torch.nn.functional as F

from torch_oracle import gpt


def _masks(steps):
    causal = np.triu(np.full((steps, steps), -np.inf), k=1)
    keep = np.arange(steps) < np.array([5, 3])[:, None]
    padding = np.where(keep, 0.0, -np.inf)[:, None, None, :]
    return {"causal": causal, "padding": padding, "none": None}


def _kernels(cases):
    for name, mask in _masks(5).items():
        rng = np.random.default_rng(0)
        q, k, v = (rng.normal(size=(2, 3, 5, 4)) for _ in range(3))
        weight = rng.normal(size=(2, 3, 5, 4))
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        tm = None if mask is None else torch.tensor(mask, dtype=torch.float64)
        out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
        (out * torch.tensor(weight)).sum().backward()
        cases.put(f"attention/{name}", seed=0, q=q, k=k, v=v, weight=weight, out=out)
        cases.put(f"attention/{name}", grad_q=tq.grad, grad_k=tk.grad, grad_v=tv.grad)

    rng = np.random.default_rng(0)
    x, gamma, beta = rng.normal(1.0, 3.0, (2, 5, 8)), rng.normal(size=8), rng.normal(size=8)
    weight = rng.normal(size=x.shape)
    tensors = [torch.tensor(a, requires_grad=True) for a in (x, gamma, beta)]
    out = F.layer_norm(tensors[0], (8,), tensors[1], tensors[2], eps=1e-5)
    (out * torch.tensor(weight)).sum().backward()
    grads = {f"grad_{n}": t.grad for n, t in zip(("x", "gamma", "beta"), tensors)}
    cases.put("layernorm", seed=0, x=x, gamma=gamma, beta=beta, weight=weight, out=out, **grads)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7)) * 3
    weight = rng.normal(size=x.shape)
    xt = torch.tensor(x, requires_grad=True)
    out = F.gelu(xt, approximate="tanh")
    (out * torch.tensor(weight)).sum().backward()
    cases.put("gelu", seed=0, x=x, weight=weight, out=out, grad_x=xt.grad)


def _accelerate(cases):
    config = dict(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    ref, state = gpt.seeded(config, seed=0)
    tokens = np.random.default_rng(0).integers(0, 17, (3, 10))
    ids = torch.as_tensor(tokens)
    logits = ref(ids)
    F.cross_entropy(logits.reshape(-1, 17), ids.reshape(-1)).backward()
    grads = {f"grad.{k}": p.grad.float() for k, p in ref.named_parameters()}
    cases.put("gpt", seed=0, tokens=tokens, logits=logits.float(), **state, **grads)

    for name in ("AdamW", "Adam"):
        rng = np.random.default_rng(0)
        start = rng.normal(size=(5, 3)).astype(np.float32)
        grads = rng.normal(size=(4, 5, 3)).astype(np.float32)
        p = torch.tensor(start.copy(), requires_grad=True)
        opt = getattr(torch.optim, name)([p], lr=0.05, weight_decay=0.1)
        for g in grads:
            p.grad = torch.tensor(g)
            opt.step()
        cases.put(f"adam/{name}", seed=0, start=start, grads=grads, end=p)


def build(cases):
    _kernels(cases)
    _accelerate(cases)
