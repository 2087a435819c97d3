"""Learning: a small GPT memorises a repetitive text; an encoder-decoder learns to reverse."""

import numpy as np

from tinytorch.core.layers import Linear, Module
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformer import GPT, Seq2SeqTransformer, TransformerEncoder

TEXT = "the cat sat on the mat. " * 40


def test_small_gpt_drives_the_loss_below_half():
    chars = sorted(set(TEXT))
    data = np.array([chars.index(c) for c in TEXT])
    np.random.seed(0)
    gpt = GPT(vocab_size=len(chars), embed_dim=32, num_layers=2, num_heads=4, max_seq_len=32)
    opt = AdamW(gpt.parameters(), lr=3e-3, weight_decay=0.0)
    rng = np.random.default_rng(0)
    first = last = None
    for _ in range(200):
        starts = rng.integers(0, len(data) - 33, 16)
        x = np.stack([data[s : s + 32] for s in starts])
        y = np.stack([data[s + 1 : s + 33] for s in starts])
        loss = cross_entropy(gpt(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        last = loss.item()
    assert first > 2.0 and last < 0.5
    prompt = np.array([[chars.index(c) for c in "the cat "]])
    out = gpt.generate(prompt, max_new_tokens=16, temperature=0)
    assert "".join(chars[i] for i in out[0]) == TEXT[:24]


def test_encoder_decoder_learns_to_reverse():
    rng = np.random.default_rng(0)
    np.random.seed(0)
    start, vocab, length = 0, 7, 5  # token 0 starts the target; digits are 1..6
    model = Seq2SeqTransformer(vocab, embed_dim=32, num_layers=1, num_heads=4, max_seq_len=8)
    opt = AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    for _ in range(250):
        src = rng.integers(1, vocab, (32, length))
        tgt = np.concatenate([np.full((32, 1), start), src[:, ::-1]], axis=1)
        loss = cross_entropy(model(src, tgt[:, :-1]), tgt[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2
    src = rng.integers(1, vocab, (20, length))
    out = model.generate(src, start_token=start, max_new_tokens=length)
    assert (out[:, 1:] == src[:, ::-1]).mean() > 0.95


def test_encoder_sees_both_directions():
    np.random.seed(1)
    enc = TransformerEncoder(vocab_size=10, embed_dim=16, num_layers=1, num_heads=2)
    tokens = np.array([[1, 2, 3, 4]])
    h = enc(Tensor(tokens)).data
    assert h.shape == (1, 4, 16)
    later = tokens.copy()
    later[0, 3] = 9
    assert not np.allclose(enc(later).data[0, 0], h[0, 0])  # position 0 sees position 3


class Tagger(Module):
    """An encoder-only model with one prediction per position (BERT-style token labels)."""

    def __init__(self, vocab_size, embed_dim):
        self.encoder = TransformerEncoder(vocab_size, embed_dim, 1, num_heads=4, max_seq_len=8)
        self.head = Linear(embed_dim, vocab_size)

    def forward(self, tokens):
        return self.head(self.encoder(tokens))  # (B, S, vocab_size)


def test_encoder_only_model_learns_to_reverse_in_place():
    # position i must output the token at position S - 1 - i: the first half needs the future
    rng = np.random.default_rng(0)
    np.random.seed(0)
    vocab, length = 7, 5
    model = Tagger(vocab, embed_dim=32)
    opt = AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    for _ in range(100):
        src = rng.integers(1, vocab, (32, length))
        loss = cross_entropy(model(src), src[:, ::-1])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1
    src = rng.integers(1, vocab, (50, length))
    assert (model(src).data.argmax(-1) == src[:, ::-1]).mean() > 0.95
