"""Module 17's KV cache for the encoder-decoder: `cached_decode`, what the translate milestone's
`Seq2SeqTransformer.generate` runs when module 17 is in the package.

The encoder runs once. Each decoder block keeps two caches: its causal self-attention's (one
position more per step, as in GPT) and its cross-attention's (the encoder output's keys and
values, projected on the first step through `cached_attention(..., memory=...)`). The tokens are
the same as re-running the decoder on the whole prefix every step (module 17's tests check it).

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: it builds on module 17's `KVCache` and
`cached_attention` and module 13's models, and samples with the one `sampling_loop`.
"""

from __future__ import annotations

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import ShapeError, Tensor
from tinytorch.memo.generation import cached_attention
from tinytorch.memo.kvcache import KVCache
from tinytorch.models.decoding import _check_generate_args, sampling_loop
from tinytorch.models.transformer import sample_next, token_ids_2d


def cached_decoder_block(block, x, memory, caches, mask=None, memory_mask=None) -> Tensor:
    """A module-13 DecoderBlock on the new target positions; `caches` is (self, cross)."""
    self_cache, cross_cache = caches
    self_att, cross_att = block.self_attention, block.cross_attention
    pre_norm = block.norm_first
    if pre_norm:  # each sublayer reads its input normalised and adds to the residual
        x = x + cached_attention(self_att, block.ln1(x), self_cache, mask)
        x = x + cached_attention(cross_att, block.ln_cross(x), cross_cache, memory_mask, memory)
        return block.mlp(block.ln2(x)) + x
    x = block.ln1(x + cached_attention(self_att, x, self_cache, mask))  # normalise the sum
    x = block.ln_cross(x + cached_attention(cross_att, x, cross_cache, memory_mask, memory))
    out = x + block.mlp(x)
    return block.ln2(out)


@no_grad()
def cached_decode(model, source, start_token: int, max_new_tokens: int, source_mask=None, *,
                  temperature=0.0, top_k=None, seed=None, stop_token=None) -> np.ndarray:  # fmt: skip
    """Seq2SeqTransformer.generate with KV caches: (B, 1 + new) ids, the same as recomputing."""
    _check_generate_args(max_new_tokens, temperature, top_k, model.vocab_size, stop_token)
    if 1 + max_new_tokens > model.max_seq_len:
        raise ShapeError(
            f"target of {1 + max_new_tokens} positions exceeds max_seq_len={model.max_seq_len}; "
            "build the model with a larger max_seq_len or ask for fewer new tokens"
        )
    memory = model.encode(source, source_mask)  # (B, S, C), computed once
    out = np.full((memory.shape[0], 1), start_token)
    token_ids_2d(out, model.vocab_size)  # start_token must be a token id
    caches = [(KVCache(model.max_seq_len), KVCache()) for _ in model.blocks]

    def next_logits(tokens):  # the newest target token only, at its position
        step = np.array([[tokens.shape[1] - 1]])
        x = model.token_embedding(tokens[:, -1:]) + model.position_embedding(step)  # (B, 1, C)
        for block, pair in zip(model.blocks, caches):
            x = cached_decoder_block(block, x, memory, pair, None, source_mask)
        return model.lm_head(model.ln_f(x)).data[:, -1]  # (B, V)

    return sampling_loop(out, next_logits, sample_next, max_new_tokens, temperature=temperature,
                         top_k=top_k, seed=seed, stop_token=stop_token)  # fmt: skip


__all__ = ["cached_decoder_block", "cached_decode"]
