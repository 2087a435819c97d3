"""The GPT of module 13 written in plain torch.nn: a test oracle and the benchmark's baseline.

Same architecture and attribute names as `tinytorch.models.transformer.GPT`, so
`to_torch_state_dict(model)` loads straight in. Usage:

    ref = TorchGPT.from_tinytorch(model)             # same config, same weights (float32)
    ref = TorchGPT.from_tinytorch(model, torch.float64)
    logits = ref(torch.as_tensor(tokens))            # (B, T, vocab_size)
    out = ref.generate(torch.as_tensor(prompt), max_new_tokens=20, temperature=0)
"""

from __future__ import annotations

import math
from dataclasses import asdict, is_dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    """Causal multi-head attention with separate q/k/v/out projections and an optional cache."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (
            self._heads(self.q_proj(x)),
            self._heads(self.k_proj(x)),
            self._heads(self.v_proj(x)),
        )
        if cache is not None:  # append to the keys/values of earlier positions
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        past = k.shape[2] - t
        blocked = torch.ones(t, past + t, dtype=torch.bool, device=x.device).triu(past + 1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, T, past + T)
        weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(b, t, c)  # (B, T, C)
        return self.out_proj(out)


class MLP(nn.Module):
    def __init__(self, embed_dim: int, hidden_dim: int):
        super().__init__()
        self.linear1 = nn.Linear(embed_dim, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, embed_dim)

    def forward(self, x):
        return self.linear2(F.gelu(self.linear1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, embed_dim, num_heads, mlp_ratio=4, norm_first=True):
        super().__init__()
        self.attention = SelfAttention(embed_dim, num_heads)
        self.ln1 = nn.LayerNorm(embed_dim, eps=1e-5)
        self.mlp = MLP(embed_dim, int(embed_dim * mlp_ratio))
        self.ln2 = nn.LayerNorm(embed_dim, eps=1e-5)
        self.norm_first = norm_first

    def forward(self, x, cache=None):
        if self.norm_first:
            x = x + self.attention(self.ln1(x), cache)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attention(x, cache))
        return self.ln2(x + self.mlp(x))


def sinusoidal_positions(max_seq_len: int, embed_dim: int) -> torch.Tensor:
    """The (max_seq_len, embed_dim) sine/cosine table of "Attention Is All You Need"."""
    pos = torch.arange(max_seq_len, dtype=torch.float64)[:, None]
    freq = torch.exp(
        torch.arange(0, embed_dim, 2, dtype=torch.float64) * -math.log(1e4) / embed_dim
    )
    table = torch.zeros(max_seq_len, embed_dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : embed_dim // 2]
    return table


class TorchGPT(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab_size); the constructor mirrors tinytorch's GPT."""

    def __init__(self, vocab_size, embed_dim, num_layers, num_heads, max_seq_len=1024,
                 mlp_ratio=4, norm_first=True, tie_weights=False, position="learned"):  # fmt: skip
        super().__init__()
        self.max_seq_len = max_seq_len
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        if position == "learned":
            self.position_embedding = nn.Embedding(max_seq_len, embed_dim)
        else:  # a fixed table: a buffer, not a weight, and not in the state dict
            table = sinusoidal_positions(max_seq_len, embed_dim).float()
            self.register_buffer("position_table", table, persistent=False)
        self.blocks = nn.ModuleList(
            Block(embed_dim, num_heads, mlp_ratio, norm_first) for _ in range(num_layers)
        )
        self.ln_f = nn.LayerNorm(embed_dim, eps=1e-5)
        self.lm_head = nn.Linear(embed_dim, vocab_size, bias=not tie_weights)
        if tie_weights:
            self.lm_head.weight = self.token_embedding.weight

    @classmethod
    def from_config(cls, config) -> TorchGPT:
        """From a GPTConfig (or any dataclass / dict with the same fields)."""
        return cls(**(asdict(config) if is_dataclass(config) else dict(config)))

    @classmethod
    def from_tinytorch(cls, model, dtype=torch.float32) -> TorchGPT:
        """The same architecture with the tinytorch model's weights."""
        ref = cls.from_config(model.config)
        ref.load_tinytorch(model)
        return ref.to(dtype)

    def load_tinytorch(self, model) -> None:
        from tinytorch.models.weights import to_torch_state_dict

        state = {k: torch.from_numpy(np.array(v)) for k, v in to_torch_state_dict(model).items()}
        self.load_state_dict(state)

    def forward(self, idx: torch.Tensor, caches: list[dict] | None = None) -> torch.Tensor:
        past = 0 if not caches or "k" not in caches[0] else caches[0]["k"].shape[2]
        pos = torch.arange(past, past + idx.shape[1], device=idx.device)
        if hasattr(self, "position_embedding"):
            x = self.token_embedding(idx) + self.position_embedding(pos)[None]  # (B, T, C)
        else:
            x = self.token_embedding(idx) + self.position_table[pos][None]  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        return self.lm_head(self.ln_f(x))  # (B, T, vocab_size)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True,
                 generator=None) -> torch.Tensor:  # fmt: skip
        """Greedy at temperature 0; the cache is refilled whenever the window slides."""
        caches = None
        for _ in range(max_new_tokens):
            window = idx[:, -self.max_seq_len :]
            if not use_cache:
                logits = self(window)[:, -1]
            elif caches is None or idx.shape[1] > self.max_seq_len:
                caches = [{} for _ in self.blocks]
                logits = self(window, caches)[:, -1]
            else:
                logits = self(idx[:, -1:], caches)[:, -1]
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, top_k).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx
