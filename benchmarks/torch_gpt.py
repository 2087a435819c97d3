"""The PyTorch a user would run: a nanoGPT-style GPT, the benchmark's speed baseline.

Fused QKV projection (`c_attn`), `F.scaled_dot_product_attention(..., is_causal=True)`, and for
generation a KV cache preallocated to the model's context. It does the same math as
`tinytorch.models.transformer.GPT` (pre-norm, LayerNorm eps 1e-5, GELU tanh approximation, learned
positions, biases everywhere, an lm_head with bias unless the weights are tied, GPT-2's
initialisation), so `TorchGPT.from_tinytorch(model)` computes the same logits. The test oracle of
the module tests is `tests/torch_reference.py`, written for readability; this one is written for
speed, the way nanoGPT is.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.c_attn = nn.Linear(embed_dim, 3 * embed_dim)  # q, k, v in one GEMM
        self.c_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor, cache=None, past: int = 0) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (
            z.view(b, t, self.num_heads, c // self.num_heads).transpose(1, 2) for z in (q, k, v)
        )
        if cache is not None:  # preallocated (B, H, max_seq_len, D) buffers
            keys, values = cache
            keys[:, :, past : past + t] = k
            values[:, :, past : past + t] = v
            k, v = keys[:, :, : past + t], values[:, :, : past + t]
        # a prefill starts at position 0 (causal); one new token sees every cached key
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, embed_dim: int, hidden: int):
        super().__init__()
        self.c_fc = nn.Linear(embed_dim, hidden)
        self.c_proj = nn.Linear(hidden, embed_dim)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, hidden: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embed_dim, eps=1e-5)
        self.attn = CausalSelfAttention(embed_dim, num_heads)
        self.ln_2 = nn.LayerNorm(embed_dim, eps=1e-5)
        self.mlp = MLP(embed_dim, hidden)

    def forward(self, x, cache=None, past: int = 0):
        x = x + self.attn(self.ln_1(x), cache, past)
        return x + self.mlp(self.ln_2(x))


class TorchGPT(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab_size); built from a tinytorch GPTConfig."""

    def __init__(self, config):
        super().__init__()
        c, n_layers = config.embed_dim, config.num_layers
        self.config, self.max_seq_len = config, config.max_seq_len
        self.wte = nn.Embedding(config.vocab_size, c)
        self.wpe = nn.Embedding(config.max_seq_len, c)
        hidden = int(c * config.mlp_ratio)
        self.h = nn.ModuleList(Block(c, config.num_heads, hidden) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(c, eps=1e-5)
        self.lm_head = nn.Linear(c, config.vocab_size, bias=not config.tie_weights)
        if config.tie_weights:
            self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():  # GPT-2's initialisation, as tinytorch's
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                residual = name.endswith("c_proj.weight")
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layers) if residual else 0.02)

    def forward(self, idx: torch.Tensor, caches=None, past: int = 0) -> torch.Tensor:
        pos = torch.arange(past, past + idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for i, block in enumerate(self.h):
            x = block(x, None if caches is None else caches[i], past)
        return self.lm_head(self.ln_f(x))

    def new_caches(self, batch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        cfg = self.config
        shape = (batch, cfg.num_heads, self.max_seq_len, cfg.embed_dim // cfg.num_heads)
        return [(torch.empty(shape), torch.empty(shape)) for _ in self.h]

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Greedy decoding with the preallocated cache (refilled if the window slides)."""
        out = torch.empty(idx.shape[0], idx.shape[1] + max_new_tokens, dtype=idx.dtype)
        out[:, : idx.shape[1]] = idx
        length, caches, past = idx.shape[1], self.new_caches(idx.shape[0]), 0
        step = idx
        for _ in range(max_new_tokens):
            if past + step.shape[1] > self.max_seq_len:  # slide: refill from the last window
                step, past = out[:, max(0, length - self.max_seq_len) : length], 0
            logits = self(step, caches, past)[:, -1]
            past += step.shape[1]
            out[:, length] = logits.argmax(-1)
            step = out[:, length : length + 1]
            length += 1
        return out

    @classmethod
    def from_tinytorch(cls, model) -> TorchGPT:
        """The same config and weights as a tinytorch GPT (float32)."""
        ref = cls(model.config)
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
        state = {
            "wte.weight": t(model.token_embedding.weight.data),
            "wpe.weight": t(model.position_embedding.weight.data),
            "ln_f.weight": t(model.ln_f.gamma.data),
            "ln_f.bias": t(model.ln_f.beta.data),
        }
        if model.lm_head is None:
            state["lm_head.weight"] = state["wte.weight"]
        else:
            state["lm_head.weight"] = t(model.lm_head.weight.data.T)
            state["lm_head.bias"] = t(model.lm_head.bias.data)
        for i, block in enumerate(model.blocks):
            att, p = block.attention, f"h.{i}."
            qkv = (att.q_proj, att.k_proj, att.v_proj)
            state[p + "attn.c_attn.weight"] = t(np.concatenate([m.weight.data.T for m in qkv]))
            state[p + "attn.c_attn.bias"] = t(np.concatenate([m.bias.data for m in qkv]))
            pairs = {
                "attn.c_proj": att.out_proj,
                "mlp.c_fc": block.mlp.linear1,
                "mlp.c_proj": block.mlp.linear2,
            }
            for name, lin in pairs.items():
                state[p + name + ".weight"] = t(lin.weight.data.T)
                state[p + name + ".bias"] = t(lin.bias.data)
            for name, ln in (("ln_1", block.ln1), ("ln_2", block.ln2)):
                state[p + name + ".weight"] = t(ln.gamma.data)
                state[p + name + ".bias"] = t(ln.beta.data)
        ref.load_state_dict(state)
        return ref
