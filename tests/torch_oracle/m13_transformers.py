"""Module 13: LayerNorm, the MLP, the GPT (every variant), greedy generation, the repetition
penalty and PyTorch's own decoder layer, by PyTorch."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from torch_oracle import gpt

SIZES = dict(vocab_size=23, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=12)


def _layers(cases):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 16))
    gamma, beta = rng.normal(size=16), rng.normal(size=16)
    weight = rng.normal(size=(3, 7, 16))
    ref = nn.LayerNorm(16).double()
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(gamma))
        ref.bias.copy_(torch.from_numpy(beta))
    xr = torch.tensor(x, requires_grad=True)
    out = ref(xr)
    (out * torch.from_numpy(weight)).sum().backward()
    cases.put("layernorm", seed=0, x=x, gamma=gamma, beta=beta, weight=weight, out=out)
    cases.put("layernorm", grad_x=xr.grad, grad_gamma=ref.weight.grad, grad_beta=ref.bias.grad)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 8)).astype(np.float32)
    w1, w2 = rng.uniform(-0.35, 0.35, (8, 12)), rng.uniform(-0.29, 0.29, (12, 8))  # (in, out)
    b1, b2 = rng.uniform(-0.35, 0.35, 12), rng.uniform(-0.29, 0.29, 8)
    w1, w2, b1, b2 = (a.astype(np.float32) for a in (w1, w2, b1, b2))
    ref = nn.Sequential(nn.Linear(8, 12), nn.GELU("tanh"), nn.Linear(12, 8))
    with torch.no_grad():
        ref[0].weight.copy_(torch.from_numpy(w1.T.copy()))
        ref[0].bias.copy_(torch.from_numpy(b1))
        ref[2].weight.copy_(torch.from_numpy(w2.T.copy()))
        ref[2].bias.copy_(torch.from_numpy(b2))
    cases.put("mlp", seed=0, x=x, w1=w1, b1=b1, w2=w2, b2=b2, out=ref(torch.from_numpy(x)))


def _gpts(cases):
    for norm_first in (True, False):
        for tie in (False, True):
            ref, state = gpt.seeded(SIZES | dict(norm_first=norm_first, tie_weights=tie), seed=1)
            rng = np.random.default_rng(0)
            tokens = rng.integers(0, 23, (3, 9))
            fields = gpt.forward_and_grads(ref, tokens, rng.normal(size=(3, 9, 23)))
            cases.put(f"parity/{norm_first}/{tie}", seed=1, **state, **fields)

    ref, state = gpt.seeded(SIZES, seed=3, scale=0.02)
    rng = np.random.default_rng(9)  # a training step's worth of change, made in torch
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(torch.from_numpy(0.01 * rng.standard_normal(tuple(p.shape))))
    state = {f"state.{k}": v.float().numpy().copy() for k, v in ref.state_dict().items()}
    tokens = rng.integers(0, 23, (2, 7))
    ref = ref.float()
    ref.load_state_dict({k[6:]: torch.from_numpy(v) for k, v in state.items()})
    cases.put("roundtrip", seed=3, **state, tokens=tokens, logits=ref(torch.as_tensor(tokens)))

    for norm_first in (True, False):
        config = SIZES | dict(position="sinusoidal", norm_first=norm_first)
        ref, state = gpt.seeded(config, seed=6)
        named = any("position" in name for name, _ in ref.named_parameters())
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, 23, (3, 12))
        fields = gpt.forward_and_grads(ref, tokens, rng.normal(size=(3, 12, 23)))
        cases.put(f"sinusoidal/{norm_first}", seed=6, position_weights=named, **state, **fields)

    config = dict(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)
    ref, state = gpt.seeded(config, seed=4, scale=0.02, sharpen=20)  # logits differ by token
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    greedy = {
        f"cache_{use_cache}": ref.generate(torch.as_tensor(prompt), 12, 0, use_cache=use_cache)
        for use_cache in (True, False)
    }  # 12 new tokens slide past max_seq_len
    cases.put("greedy", seed=4, prompt=prompt, **state, **greedy)


def _steering(cases):
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, size=(4, 12))
    context = rng.integers(0, 12, size=(4, 7))  # repeats within a row count once
    theirs = torch.tensor(logits)
    score = torch.gather(theirs, 1, torch.tensor(context))
    score = torch.where(score < 0, score * 1.3, score / 1.3)
    theirs.scatter_(1, torch.tensor(context), score)
    cases.put("repetition_penalty", seed=0, logits=logits, context=context, penalized=theirs)


def _decoder_weights(rng, embed_dim, hidden):
    """A DecoderBlock's parameters by tinytorch name, (in, out) layout, off their init."""
    found = {}
    for attn in ("self_attention", "cross_attention"):
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            found[f"{attn}.{proj}.weight"] = rng.normal(0, 0.25, (embed_dim, embed_dim))
            found[f"{attn}.{proj}.bias"] = rng.normal(0, 0.1, embed_dim)
    for ln in ("ln1", "ln_cross", "ln2"):
        found[f"{ln}.gamma"] = 1 + rng.normal(0, 0.1, embed_dim)
        found[f"{ln}.beta"] = rng.normal(0, 0.1, embed_dim)
    found["mlp.linear1.weight"] = rng.normal(0, 0.25, (embed_dim, hidden))
    found["mlp.linear1.bias"] = rng.normal(0, 0.1, hidden)
    found["mlp.linear2.weight"] = rng.normal(0, 0.18, (hidden, embed_dim))
    found["mlp.linear2.bias"] = rng.normal(0, 0.1, embed_dim)
    return {k: v.astype(np.float32) for k, v in found.items()}


def _decoder_layer(w, embed_dim, hidden, norm_first):
    """PyTorch's own decoder layer (dropout off, GPT-2's GELU) holding the weights `w`."""
    layer = nn.TransformerDecoderLayer(
        embed_dim, 4, hidden, dropout=0.0, activation=lambda x: F.gelu(x, approximate="tanh"),
        batch_first=True, norm_first=norm_first,
    )  # fmt: skip
    with torch.no_grad():
        for theirs, ours in (
            ("self_attn", "self_attention"),
            ("multihead_attn", "cross_attention"),
        ):
            attn = getattr(layer, theirs)
            qkv = [w[f"{ours}.{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")]
            attn.in_proj_weight.copy_(torch.from_numpy(np.concatenate(qkv, axis=1).T.copy()))
            biases = [w[f"{ours}.{p}.bias"] for p in ("q_proj", "k_proj", "v_proj")]
            attn.in_proj_bias.copy_(torch.from_numpy(np.concatenate(biases)))
            attn.out_proj.weight.copy_(torch.from_numpy(w[f"{ours}.out_proj.weight"].T.copy()))
            attn.out_proj.bias.copy_(torch.from_numpy(w[f"{ours}.out_proj.bias"]))
        for name in ("linear1", "linear2"):
            getattr(layer, name).weight.copy_(torch.from_numpy(w[f"mlp.{name}.weight"].T.copy()))
            getattr(layer, name).bias.copy_(torch.from_numpy(w[f"mlp.{name}.bias"]))
        for theirs, ours in (("norm1", "ln1"), ("norm2", "ln_cross"), ("norm3", "ln2")):
            getattr(layer, theirs).weight.copy_(torch.from_numpy(w[f"{ours}.gamma"]))
            getattr(layer, theirs).bias.copy_(torch.from_numpy(w[f"{ours}.beta"]))
    return layer.eval()


def _seq2seq(cases):
    lengths = [5, 2, 3]
    for norm_first in (True, False):
        rng = np.random.default_rng(1)
        weights = _decoder_weights(rng, 16, 32)
        x = rng.normal(size=(3, 4, 16)).astype(np.float32)
        memory = rng.normal(size=(3, 5, 16)).astype(np.float32)
        upstream = rng.normal(size=(3, 4, 16)).astype(np.float32)
        keep = np.arange(5) < np.array(lengths)[:, None]
        causal = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), k=1)
        tx = torch.tensor(x, requires_grad=True)
        out = _decoder_layer(weights, 16, 32, norm_first)(
            tx, torch.tensor(memory), tgt_mask=torch.from_numpy(causal),
            memory_key_padding_mask=torch.tensor(~keep),
        )  # fmt: skip
        (out * torch.tensor(upstream)).sum().backward()
        params = {f"param.{k}": v for k, v in weights.items()}
        cases.put(f"decoder/{norm_first}", seed=1, x=x, memory=memory, upstream=upstream, **params)
        cases.put(f"decoder/{norm_first}", out=out, grad_x=tx.grad)


def build(cases):
    _layers(cases)
    _gpts(cases)
    _steering(cases)
    _seq2seq(cases)
