"""Encoder-only and encoder-decoder transformers, built from module 13's GPT parts.

`TransformerEncoder` is the GPT stack without the causal mask; `DecoderBlock` adds
cross-attention over the encoder's output (`memory`); `Seq2SeqTransformer` joins the two, as the
2017 translation model does (the translate milestone trains it). Decoding runs the encoder once;
with module 17 in the package each step runs the decoder on the newest token only.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it builds on module 13.
"""

import numpy as np

from tinytorch.core.attention import MultiHeadAttention, causal_mask
from tinytorch.core.autograd import no_grad
from tinytorch.core.embeddings import Embedding
from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import ShapeError
from tinytorch.models.decoding import _cached_generation, _check_generate_args, sampling_loop
from tinytorch.models.transformer import (
    TransformerBlock,
    init_gpt2_weights,
    sample_next,
    token_ids_2d,
)
from tinytorch.nn.feedforward import MLP
from tinytorch.nn.normalization import LayerNorm


class DecoderBlock(Module):
    """Causal self-attention, cross-attention over the encoder output, and an MLP.

    `norm_first=True` (default) is pre-norm; `False` normalises after each residual addition.
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: float = 4, norm_first=True):
        self.self_attention = MultiHeadAttention(embed_dim, num_heads)  # checks the head count
        self.ln1 = LayerNorm(embed_dim)
        self.cross_attention = MultiHeadAttention(embed_dim, num_heads)
        self.ln_cross = LayerNorm(embed_dim)
        self.mlp = MLP(embed_dim, hidden_dim=int(embed_dim * mlp_ratio))
        self.ln2 = LayerNorm(embed_dim)
        self.norm_first = norm_first

    def forward(self, x, memory, mask=None, memory_mask=None):
        """(B, T, C) -> (B, T, C): `mask` over the target, `memory_mask` over the source."""
        cross = dict(key=memory, value=memory, mask=memory_mask)
        if self.norm_first:
            x = x + self.self_attention(self.ln1(x), mask)  # (B, T, C)
            x = x + self.cross_attention(self.ln_cross(x), **cross)  # (B, T, C)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.self_attention(x, mask))
        x = self.ln_cross(x + self.cross_attention(x, **cross))
        return self.ln2(x + self.mlp(x))


def _check_length(seq_len: int, max_seq_len: int, what: str) -> None:
    if seq_len > max_seq_len:
        raise ShapeError(
            f"{what} of {seq_len} positions exceeds max_seq_len={max_seq_len}; build the model "
            f"with a larger max_seq_len or shorten the {what}"
        )


class TransformerEncoder(Module):
    """Encoder-only stack: tokens (B, S) -> contextual vectors (B, S, C), no causal mask."""

    def __init__(self, vocab_size, embed_dim, num_layers, num_heads, max_seq_len=512,
                 norm_first=True):  # fmt: skip
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.position_embedding = Embedding(max_seq_len, embed_dim)
        self.blocks = [
            TransformerBlock(embed_dim, num_heads, norm_first=norm_first) for _ in range(num_layers)
        ]
        self.ln_f = LayerNorm(embed_dim)
        init_gpt2_weights(self, num_layers)

    def forward(self, tokens, mask=None):
        ids = token_ids_2d(tokens, self.vocab_size)  # (B, S)
        _check_length(ids.shape[1], self.max_seq_len, "source")
        x = self.token_embedding(ids) + self.position_embedding(np.arange(ids.shape[1])[None])
        for layer in self.blocks:
            x = layer(x, mask=mask)  # a padding mask, or None: every position sees every other
        return self.ln_f(x)  # (B, S, C)


class Seq2SeqTransformer(Module):
    """Encoder-decoder: source (B, S) and target prefix (B, T) -> target logits (B, T, vocab)."""

    def __init__(self, vocab_size, embed_dim, num_layers, num_heads, max_seq_len=512,
                 norm_first=True):  # fmt: skip
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.encoder = TransformerEncoder(
            vocab_size, embed_dim, num_layers, num_heads, max_seq_len, norm_first
        )
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.position_embedding = Embedding(max_seq_len, embed_dim)
        self.blocks = [
            DecoderBlock(embed_dim, num_heads, norm_first=norm_first) for _ in range(num_layers)
        ]
        self.ln_f = LayerNorm(embed_dim)
        self.lm_head = Linear(embed_dim, vocab_size)
        init_gpt2_weights(self, num_layers)

    def forward(self, source, target, source_mask=None):
        """`source_mask` (padding_mask of the source lengths) hides padded source positions."""
        return self.decode(target, self.encode(source, source_mask), source_mask)

    def encode(self, source, source_mask=None):
        """The encoder's output (B, S, C): the `memory` every decoder block attends to."""
        return self.encoder(source, mask=source_mask)

    def decode(self, target, memory, memory_mask=None):
        """Logits (B, T, vocab) of the target prefix, attending to the encoder's `memory`."""
        ids = token_ids_2d(target, self.vocab_size)  # (B, T)
        seq_len = ids.shape[1]
        _check_length(seq_len, self.max_seq_len, "target")
        x = self.token_embedding(
            ids
        ) + self.position_embedding(  # (B, T, C): each position's vector
            np.arange(seq_len).reshape(1, seq_len)
        )
        mask = None if seq_len == 1 else causal_mask(seq_len)  # one query may see itself
        for layer in self.blocks:
            x = layer(x, memory, mask=mask, memory_mask=memory_mask)
        return self.lm_head(self.ln_f(x))  # (B, T, vocab_size)

    @no_grad()
    def generate(self, source, start_token: int, max_new_tokens: int, source_mask=None, *,
                 temperature=0.0, top_k=None, seed=None, use_cache=None,
                 stop_token=None) -> np.ndarray:  # fmt: skip
        """(B, 1 + new) ids beginning with `start_token`; greedy unless temperature > 0.

        The encoder runs once. `use_cache` decodes one new position per step with module 17's
        KV caches (`cached_decode`; by default when module 17 is in the package), with the same
        result as re-running the decoder on the whole prefix. Once every row has produced
        `stop_token` generation ends early (finished rows repeat it).
        """
        if _cached_generation(use_cache) is not None:
            from tinytorch.memo.decoder import cached_decode  # given, on module 17's cache

            return cached_decode(self, source, start_token, max_new_tokens, source_mask,
                                 temperature=temperature, top_k=top_k, seed=seed,
                                 stop_token=stop_token)  # fmt: skip
        _check_generate_args(max_new_tokens, temperature, top_k, self.vocab_size, stop_token)
        _check_length(1 + max_new_tokens, self.max_seq_len, "target")
        memory = self.encode(source, source_mask)  # (B, S, C), computed once
        out = np.full((memory.shape[0], 1), start_token)
        token_ids_2d(out, self.vocab_size)  # start_token must be a token id

        def next_logits(tokens):  # the whole prefix again, every step
            return self.decode(tokens, memory, source_mask).data[:, -1]  # (B, V)

        return sampling_loop(out, next_logits, sample_next, max_new_tokens,
                             temperature=temperature, top_k=top_k, seed=seed,
                             stop_token=stop_token)  # fmt: skip


__all__ = ["DecoderBlock", "TransformerEncoder", "Seq2SeqTransformer"]  # fmt: skip
