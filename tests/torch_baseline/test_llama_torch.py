"""Forward values and gradients against PyTorch: each part, and a whole Llama written the way
Meta's reference code writes it (rotary by complex numbers on interleaved pairs, repeat_kv)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tinytorch.accel.accelerate import accelerate, accelerated
from tinytorch.core.attention import causal_mask
from tinytorch.core.tensor import Tensor, precision
from tinytorch.models.llama import GroupedQueryAttention, Llama
from tinytorch.nn.llama import RMSNorm, RotaryEmbedding, SwiGLU, silu


def to_torch(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def linear(w: torch.Tensor):
    """A tinytorch weight (in, out) as torch's (out, in), still differentiable."""
    return lambda x: F.linear(x, w.T)


def torch_rotary(x: torch.Tensor, start: int, theta: float) -> torch.Tensor:
    """Meta's apply_rotary_emb on (B, T, H, D): pairs (2k, 2k+1) as complex numbers."""
    dim, steps = x.shape[-1], x.shape[1]
    freqs = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.outer(torch.arange(start, start + steps, dtype=torch.float64), freqs)
    cis = torch.polar(torch.ones_like(angles), angles)[None, :, None, :]  # (1, T, 1, D/2)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * cis).flatten(3)


def torch_attention(x, wq, wk, wv, wo, heads, kv_heads, start=0, theta=10000.0):
    """Meta's Attention.forward (no cache): rotary q and k, repeat_kv, causal softmax."""
    b, t, c = x.shape
    dim = c // heads
    q = torch_rotary(linear(wq)(x).view(b, t, heads, dim), start, theta)
    k = torch_rotary(linear(wk)(x).view(b, t, kv_heads, dim), start, theta)
    v = linear(wv)(x).view(b, t, kv_heads, dim)
    k = torch.repeat_interleave(k, heads // kv_heads, dim=2)  # repeat_kv
    v = torch.repeat_interleave(v, heads // kv_heads, dim=2)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    )
    return linear(wo)(out.transpose(1, 2).reshape(b, t, c))


def torch_rmsnorm(x, w, eps=1e-5):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def torch_llama(tokens, model: Llama, params):
    """The same Llama in torch ops, reading `params` (torch tensors in parameters() order)."""
    c = model.config
    it = iter(params)
    emb = next(it)
    x = emb[torch.as_tensor(tokens)]
    for _ in model.blocks:
        n1, wq, wk, wv, wo, n2, w1, w3, w2 = (next(it) for _ in range(9))
        h = torch_rmsnorm(x, n1, c.norm_eps)
        x = x + torch_attention(h, wq, wk, wv, wo, c.num_heads, c.num_kv_heads, 0, c.rope_theta)
        h = torch_rmsnorm(x, n2, c.norm_eps)
        x = x + linear(w2)(F.silu(linear(w1)(h)) * linear(w3)(h))
    x = torch_rmsnorm(x, next(it), c.norm_eps)
    return x @ emb.T if c.tie_weights else linear(next(it))(x)


def test_rmsnorm_matches_torch(rng):
    x, w = rng.normal(2.0, 3.0, (3, 5, 16)), rng.normal(size=16)
    weight = rng.normal(size=(3, 5, 16))
    norm = RMSNorm(16)
    norm.weight = Tensor(w.astype(np.float32), requires_grad=True)
    xt = Tensor(x.astype(np.float32), requires_grad=True)
    out = norm(xt)
    (out * Tensor(weight.astype(np.float32))).sum().backward()
    xr, wr = to_torch(x), to_torch(w)
    ref = torch.nn.RMSNorm(16, eps=1e-5).double()
    with torch.no_grad():
        ref.weight.copy_(wr)
    ref_out = ref(xr)
    (ref_out * torch.from_numpy(weight)).sum().backward()
    np.testing.assert_allclose(out.data, ref_out.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xt.grad, xr.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(norm.weight.grad, ref.weight.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("start, theta", [(0, 10000.0), (7, 10000.0), (3, 500000.0)])
def test_rotary_matches_metas_complex_rotation(rng, start, theta):
    x = rng.normal(size=(2, 5, 3, 8))  # (B, T, H, D) as Meta lays it out
    weight = rng.normal(size=x.shape)
    with precision(np.float64):
        xt = Tensor(x.transpose(0, 2, 1, 3), requires_grad=True)  # (B, H, T, D)
        out = RotaryEmbedding(8, 16, theta)(xt, start)
        (out * Tensor(weight.transpose(0, 2, 1, 3))).sum().backward()
    xr = to_torch(x)
    ref = torch_rotary(xr, start, theta)
    (ref * torch.from_numpy(weight)).sum().backward()
    np.testing.assert_allclose(out.data.transpose(0, 2, 1, 3), ref.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(xt.grad.transpose(0, 2, 1, 3), xr.grad.numpy(), atol=1e-12)


def test_silu_and_swiglu_match_torch(rng):
    x = rng.normal(0.0, 3.0, (2, 4, 6))
    weight = rng.normal(size=(2, 4, 6))
    np.random.seed(0)
    ff = SwiGLU(6, hidden_dim=10)
    with precision(np.float64):
        for lin in (ff.w1, ff.w2, ff.w3):
            lin.weight = Tensor(lin.weight.data, requires_grad=True)
        xt = Tensor(x, requires_grad=True)
        out = ff(xt)
        (out * Tensor(weight)).sum().backward()
        np.testing.assert_allclose(silu(Tensor(x)).data, F.silu(torch.from_numpy(x)).numpy())
    xr = to_torch(x)
    w1, w2, w3 = (to_torch(lin.weight.data) for lin in (ff.w1, ff.w2, ff.w3))
    ref = linear(w2)(F.silu(linear(w1)(xr)) * linear(w3)(xr))
    (ref * torch.from_numpy(weight)).sum().backward()
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xt.grad, xr.grad.numpy(), rtol=1e-10, atol=1e-12)
    for lin, ref_w in zip((ff.w1, ff.w2, ff.w3), (w1, w2, w3)):
        np.testing.assert_allclose(lin.weight.grad, ref_w.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_grouped_query_attention_matches_torch(rng, kv_heads):
    np.random.seed(kv_heads)
    attn = GroupedQueryAttention(16, num_heads=4, num_kv_heads=kv_heads, max_seq_len=8)
    x = rng.normal(size=(2, 6, 16))
    weight = rng.normal(size=x.shape)
    lins = (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj)
    with precision(np.float64):
        for lin in lins:
            lin.weight = Tensor(lin.weight.data, requires_grad=True)
        xt = Tensor(x, requires_grad=True)
        out = attn(xt, causal_mask(6))
        (out * Tensor(weight)).sum().backward()
    xr = to_torch(x)
    ws = [to_torch(lin.weight.data) for lin in lins]
    ref = torch_attention(xr, *ws, heads=4, kv_heads=kv_heads)
    (ref * torch.from_numpy(weight)).sum().backward()
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xt.grad, xr.grad.numpy(), rtol=1e-9, atol=1e-12)
    for lin, w in zip(lins, ws):
        np.testing.assert_allclose(lin.weight.grad, w.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fast", [False, True], ids=["lesson", "accelerated"])
@pytest.mark.parametrize("tie", [False, True])
def test_llama_logits_and_gradients_match_torch(rng, tie, fast):
    np.random.seed(3)
    model = Llama(24, 16, 2, 4, num_kv_heads=2, max_seq_len=8, multiple_of=8, tie_weights=tie)
    if fast:  # module 18's fast paths for module 21's parts (tinytorch/accel/llama.py)
        accelerate(model, workers=1)
        assert {"rmsnorm", "rotary", "swiglu", "gqa"} <= accelerated(model)
    for p in model.parameters():
        p.data *= 4 if p.ndim == 2 else rng.uniform(0.5, 1.5, p.shape).astype(np.float32)
    tokens = rng.integers(0, 24, (2, 7))
    weight = rng.normal(size=(2, 7, 24))
    out = model(tokens)
    (out * Tensor(weight.astype(np.float32))).sum().backward()
    params = [to_torch(p.data) for p in model.parameters()]
    ref = torch_llama(tokens, model, params)
    (ref * torch.from_numpy(weight)).sum().backward()
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-4, atol=1e-4)
    for (name, p), r in zip(model.named_parameters(), params):
        scale = np.abs(r.grad.numpy()).max()
        np.testing.assert_allclose(p.grad, r.grad.numpy(), atol=1e-4 * scale, err_msg=name)
