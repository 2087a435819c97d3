"""The benchmark's PyTorch Llama: module 21's Llama as a PyTorch user would write it.

Meta's layout (rotary on interleaved pairs, as complex numbers), `F.rms_norm`,
`F.scaled_dot_product_attention` with `enable_gqa` (no copy of the shared key/value heads), a
preallocated cache of the kv heads only, and greedy generation. Built from a tinytorch
`LlamaConfig`; `from_tinytorch` copies a tinytorch Llama's weights so tests can compare logits.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.torch_gpt import TorchGPT


def rotary_table(head_dim: int, max_seq_len: int, theta: float) -> torch.Tensor:
    """(max_seq_len, head_dim / 2) complex rotations."""
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), freqs)
    return torch.polar(torch.ones_like(angles), angles).to(torch.complex64)


def rotate(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, D) with pairs (2k, 2k+1) turned by cis (T, D/2)."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * cis).flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads = c.num_heads, c.num_kv_heads
        self.head_dim = c.embed_dim // c.num_heads
        self.q_proj = nn.Linear(c.embed_dim, c.embed_dim, bias=False)
        self.k_proj = nn.Linear(c.embed_dim, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.embed_dim, self.kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(c.embed_dim, c.embed_dim, bias=False)

    def forward(self, x, cis, cache=None, past: int = 0):
        b, t, c = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cis[past : past + t]), rotate(k, cis[past : past + t])
        if cache is not None:  # the kv heads only
            cache[0][:b, :, past : past + t], cache[1][:b, :, past : past + t] = k, v
            k, v = cache[0][:b, :, : past + t], cache[1][:b, :, : past + t]
        causal = t > 1 and past == 0
        if t > 1 and past > 0:
            mask = torch.ones(t, past + t, dtype=torch.bool).tril(past)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, c, hidden: int):
        super().__init__()
        self.eps = c.norm_eps
        self.attention_norm = nn.Parameter(torch.ones(c.embed_dim))
        self.attention = Attention(c)
        self.ffn_norm = nn.Parameter(torch.ones(c.embed_dim))
        self.w1 = nn.Linear(c.embed_dim, hidden, bias=False)
        self.w3 = nn.Linear(c.embed_dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, c.embed_dim, bias=False)

    def forward(self, x, cis, cache=None, past: int = 0):
        shape = (x.shape[-1],)
        x = x + self.attention(
            F.rms_norm(x, shape, self.attention_norm, self.eps), cis, cache, past
        )
        h = F.rms_norm(x, shape, self.ffn_norm, self.eps)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class TorchLlama(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab_size); built from a tinytorch LlamaConfig."""

    def __init__(self, config, hidden: int):
        super().__init__()
        c = self.config = config
        self.max_seq_len = c.max_seq_len
        self.embed = nn.Embedding(c.vocab_size, c.embed_dim)
        self.blocks = nn.ModuleList(Block(c, hidden) for _ in range(c.num_layers))
        self.norm = nn.Parameter(torch.ones(c.embed_dim))
        self.lm_head = nn.Linear(c.embed_dim, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.embed.weight
        for name, p in self.named_parameters():  # as tinytorch's init_llama_weights
            if p.dim() == 2:
                residual = name.endswith(("out_proj.weight", "w2.weight"))
                nn.init.normal_(p, std=0.02 / (2 * c.num_layers) ** 0.5 if residual else 0.02)
        head_dim = c.embed_dim // c.num_heads
        self.register_buffer("cis", rotary_table(head_dim, c.max_seq_len, c.rope_theta), False)

    def forward(self, idx: torch.Tensor, caches=None, past: int = 0) -> torch.Tensor:
        x = self.embed(idx)
        for i, block in enumerate(self.blocks):
            x = block(x, self.cis, None if caches is None else caches[i], past)
        x = F.rms_norm(x, (x.shape[-1],), self.norm, self.config.norm_eps)
        return self.lm_head(x)

    def new_caches(self, batch: int):
        c = self.config
        shape = (batch, c.num_kv_heads, self.max_seq_len, c.embed_dim // c.num_heads)
        return [(torch.empty(shape), torch.empty(shape)) for _ in self.blocks]

    # greedy decoding with the preallocated cache: the GPT's loop, on this model's forward
    generate = TorchGPT.generate

    @classmethod
    def from_tinytorch(cls, model) -> TorchLlama:
        """The same config and weights as a tinytorch Llama (float32)."""
        hidden = model.blocks[0].feed_forward.w1.weight.shape[1]
        ref = cls(model.config, hidden)
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
        state = {"embed.weight": t(model.token_embedding.weight.data),
                 "norm": t(model.norm.weight.data)}  # fmt: skip
        state["lm_head.weight"] = (
            state["embed.weight"] if model.lm_head is None else t(model.lm_head.weight.data.T)
        )
        for i, block in enumerate(model.blocks):
            p, att, ff = f"blocks.{i}.", block.attention, block.feed_forward
            state[p + "attention_norm"] = t(block.attention_norm.weight.data)
            state[p + "ffn_norm"] = t(block.ffn_norm.weight.data)
            for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
                state[p + f"attention.{name}.weight"] = t(getattr(att, name).weight.data.T)
            for name in ("w1", "w2", "w3"):
                state[p + f"{name}.weight"] = t(getattr(ff, name).weight.data.T)
        ref.load_state_dict(state)
        return ref
