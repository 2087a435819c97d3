"""A class of 20 module-13 submissions for measuring similarity checking (test fixtures).

Module 13 has six solution regions: LayerNorm.forward, MLP.forward, TransformerBlock.forward,
sample_next, GPT.forward and GPT._create_causal_mask. Eight authors wrote all six on their own
from the lesson text, each in their own way (HONEST below; where a region is one line, several
honest authors write the same line, as real students do). The other twelve submissions copy:
the reference verbatim, with renamed variables, with comments changed, reordered, reformatted;
a classmate's whole notebook in the same ways; or a single function.

`build(course)` writes them as submitted/<student>/13_transformers/transformers.ipynb and
returns the groups: every pair inside a group is a copy (to be flagged), no pair across groups
is (never flagged).
"""

from __future__ import annotations

import re
import textwrap

import nbformat

from tito.curriculum import notebooks
from tito.curriculum.catalog import find
from tito.curriculum.paths import PACKAGE_ROOT

MODULE = find("13")
REGIONS = ("layernorm", "mlp", "block", "sample", "gpt_forward", "mask")

LAYERNORM = [
    """\
    mu = x.mean(axis=-1, keepdims=True)
    centered = x - mu
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / (var + self.eps).sqrt() * self.gamma + self.beta
    """,
    """\
    var = x.var(axis=-1, keepdims=True)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) / (var + self.eps) ** 0.5
    return x_hat * self.gamma + self.beta
    """,
    """\
    n = x.shape[-1]
    total = x.sum(axis=-1, keepdims=True)
    avg = total / n
    dev = x - avg
    spread = (dev**2).sum(axis=-1, keepdims=True) / n
    scale = 1.0 / (spread + self.eps).sqrt()
    return self.beta + self.gamma * (dev * scale)
    """,
    """\
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return self.gamma * ((x - m) / (v + self.eps).sqrt()) + self.beta
    """,
    """\
    std = (x.var(axis=-1, keepdims=True) + self.eps).sqrt()
    out = (x - x.mean(axis=-1, keepdims=True)) / std
    out = out * self.gamma
    return out + self.beta
    """,
    """\
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred**2).mean(axis=-1, keepdims=True)
    normed = centred * (variance + self.eps) ** -0.5
    return normed * self.gamma + self.beta
    """,
    """\
    d = x.shape[-1]
    mean = x.sum(axis=-1, keepdims=True) * (1.0 / d)
    sq = (x - mean) * (x - mean)
    var = sq.sum(axis=-1, keepdims=True) * (1.0 / d)
    y = (x - mean) / (var + self.eps).sqrt()
    return y * self.gamma + self.beta
    """,
    """\
    stats_mean = x.mean(-1, keepdims=True)
    stats_var = x.var(-1, keepdims=True)
    return (x - stats_mean) * self.gamma / (stats_var + self.eps).sqrt() + self.beta
    """,
]

MLP = [
    "return self.linear2(self.gelu(self.linear1(x)))\n",
    "hidden = self.linear1(x)\nhidden = self.gelu(hidden)\nreturn self.linear2(hidden)\n",
    "h = self.gelu(self.linear1(x))\nout = self.linear2(h)\nreturn out\n",
    "for layer in (self.linear1, self.gelu, self.linear2):\n    x = layer(x)\nreturn x\n",
    "expanded = self.linear1(x)\nactivated = self.gelu(expanded)\nreturn self.linear2(activated)\n",
    "return self.linear2.forward(self.gelu.forward(self.linear1.forward(x)))\n",
    "return self.linear2(self.gelu(self.linear1(x)))\n",
    "hidden = self.linear1(x)\nhidden = self.gelu(hidden)\nreturn self.linear2(hidden)\n",
]

BLOCK = [  # the given code after the region is `return x`
    """\
    if self.norm_first:
        attended = self.attention(self.ln1(x), mask)
        x = x + attended
        x = x + self.mlp(self.ln2(x))
    else:
        x = self.ln1(x + self.attention(x, mask))
        x = self.ln2(x + self.mlp(x))
    """,
    """\
    norm_first = self.norm_first
    a_in = self.ln1(x) if norm_first else x
    x = x + self.attention(a_in, mask)
    if not norm_first:
        x = self.ln1(x)
    m_in = self.ln2(x) if norm_first else x
    x = x + self.mlp(m_in)
    if not norm_first:
        x = self.ln2(x)
    """,
    """\
    if not self.norm_first:
        x = self.ln1(self.attention(x, mask) + x)
        x = self.ln2(self.mlp(x) + x)
        return x
    residual = x
    x = residual + self.attention(self.ln1(residual), mask)
    residual = x
    x = residual + self.mlp(self.ln2(residual))
    """,
    """\
    sublayers = [(self.ln1, lambda h: self.attention(h, mask)), (self.ln2, self.mlp)]
    for norm, layer in sublayers:
        if self.norm_first:
            x = x + layer(norm(x))
        else:
            x = norm(x + layer(x))
    """,
    """\
    if self.norm_first:
        h = self.ln1(x)
        x = x + self.attention(h, mask=mask)
        h = self.ln2(x)
        x = x + self.mlp(h)
    else:
        h = self.attention(x, mask=mask)
        x = self.ln1(x + h)
        h = self.mlp(x)
        x = self.ln2(x + h)
    """,
    """\
    def sub(x, norm, fn):
        return x + fn(norm(x)) if self.norm_first else norm(x + fn(x))

    x = sub(x, self.ln1, lambda t: self.attention(t, mask))
    x = sub(x, self.ln2, self.mlp)
    """,
    """\
    pre = self.norm_first
    y = self.attention(self.ln1(x) if pre else x, mask)
    x = x + y if pre else self.ln1(x + y)
    z = self.mlp(self.ln2(x) if pre else x)
    x = x + z if pre else self.ln2(x + z)
    """,
    """\
    if self.norm_first:
        x = self.attention(self.ln1(x), mask) + x
        return self.mlp(self.ln2(x)) + x
    x = self.ln1(self.attention(x, mask) + x)
    x = self.ln2(self.mlp(x) + x)
    """,
]

SAMPLE = [
    """\
    if temperature == 0:
        return np.argmax(logits, axis=-1)
    scaled = logits / temperature
    if top_k is not None:
        k = min(top_k, scaled.shape[-1])
        cutoff = np.sort(scaled, axis=-1)[:, -k][:, None]
        scaled = np.where(scaled >= cutoff, scaled, -np.inf)
    scaled = scaled - scaled.max(axis=-1, keepdims=True)
    p = np.exp(scaled)
    p = p / p.sum(axis=-1, keepdims=True)
    out = np.empty(len(p), dtype=np.int64)
    for row in range(len(p)):
        out[row] = rng.choice(p.shape[-1], p=p[row])
    return out
    """,
    """\
    batch, vocab = logits.shape
    if temperature == 0:
        return logits.argmax(axis=1)
    z = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < vocab:
        order = np.argsort(z, axis=1)
        np.put_along_axis(z, order[:, : vocab - top_k], -np.inf, axis=1)
    weights = np.exp(z - z.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    u = rng.random(batch)
    picks = np.zeros(batch, dtype=np.int64)
    for i in range(batch):
        where = np.searchsorted(np.cumsum(weights[i]), u[i], side="right")
        picks[i] = min(where, vocab - 1)
    return picks
    """,
    """\
    greedy = temperature == 0
    if greedy:
        return np.argmax(logits, axis=-1)
    work = np.array(logits, dtype=np.float64) / float(temperature)
    size = work.shape[-1]
    if top_k is not None and 0 < top_k < size:
        kth_largest = np.partition(work, size - top_k, axis=-1)[:, size - top_k]
        work[work < kth_largest[:, None]] = -np.inf
    work -= np.max(work, axis=-1, keepdims=True)
    probabilities = np.exp(work)
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    cumulative = probabilities.cumsum(axis=-1)
    targets = rng.random(size=(work.shape[0], 1))
    chosen = (cumulative < targets).sum(axis=-1)
    return np.clip(chosen, 0, size - 1)
    """,
    """\
    rows = []
    for row in logits:
        if temperature == 0:
            rows.append(int(np.argmax(row)))
            continue
        row = row.astype(np.float64) / temperature
        if top_k is not None and top_k < row.size:
            smallest_kept = np.sort(row)[-top_k]
            row = np.where(row < smallest_kept, -np.inf, row)
        e = np.exp(row - row.max())
        c = np.cumsum(e / e.sum())
        rows.append(min(int(np.searchsorted(c, rng.random())), row.size - 1))
    return np.array(rows, dtype=np.int64)
    """,
    """\
    def greedy(values):
        return values.argmax(axis=-1)

    if not temperature:
        return greedy(logits)
    t = logits / temperature
    n_vocab = t.shape[-1]
    if top_k and top_k < n_vocab:
        idx = np.argpartition(-t, top_k - 1, axis=-1)[:, :top_k]
        keep = np.zeros(t.shape, dtype=bool)
        np.put_along_axis(keep, idx, True, axis=-1)
        t = np.where(keep, t, -np.inf)
    shifted = np.exp(t - np.max(t, axis=-1, keepdims=True))
    running = np.cumsum(shifted, axis=-1)
    r = rng.random((t.shape[0], 1)) * running[:, [-1]]
    return np.minimum(np.argmax(running > r, axis=-1), n_vocab - 1)
    """,
    """\
    if temperature == 0.0:
        result = np.argmax(logits, axis=1)
        return result
    adjusted = logits.astype(np.float64) * (1.0 / temperature)
    if top_k is not None:
        top_k = min(top_k, adjusted.shape[1])
        threshold = -np.sort(-adjusted, axis=1)[:, top_k - 1 : top_k]
        adjusted[adjusted < threshold] = -np.inf
    adjusted = np.exp(adjusted - adjusted.max(axis=1)[:, None])
    dist = adjusted / adjusted.sum(axis=1)[:, None]
    draws = [rng.choice(dist.shape[1], p=dist[b]) for b in range(dist.shape[0])]
    return np.asarray(draws)
    """,
    """\
    B, vocab_size = logits.shape
    if temperature == 0:
        return np.array([int(np.argmax(logits[b])) for b in range(B)])
    logit = logits / temperature
    if top_k is not None and top_k < vocab_size:
        sorted_desc = np.sort(logit, axis=-1)[:, ::-1]
        floor = sorted_desc[:, top_k - 1]
        logit = np.where(logit >= floor[:, np.newaxis], logit, -np.inf)
    probs = np.exp(logit - logit.max(-1)[:, np.newaxis])
    probs = probs / probs.sum(-1)[:, np.newaxis]
    cdf = probs.cumsum(-1)
    uniform = rng.uniform(size=B)
    token = (cdf < uniform[:, None]).sum(axis=1)
    return np.where(token >= vocab_size, vocab_size - 1, token)
    """,
    """\
    out = np.zeros(logits.shape[0], dtype=np.int64)
    for b, scores in enumerate(logits):
        if temperature == 0:
            out[b] = scores.argmax()
            continue
        s = scores / temperature
        if top_k is not None and top_k < len(s):
            s = s.copy()
            s[np.argsort(s)[:-top_k]] = -np.inf
        w = np.exp(s - s.max())
        w = w / w.sum()
        out[b] = rng.choice(len(w), p=w)
    return out
    """,
]

GPT_FORWARD = [
    """\
    tok = self.token_embedding(ids)
    pos = self.position_embedding(np.arange(seq_len))
    h = tok + pos
    causal = self._create_causal_mask(seq_len)
    for blk in self.blocks:
        h = blk(h, causal)
    h = self.ln_f(h)
    if self.lm_head is not None:
        return self.lm_head(h)
    return h @ self.token_embedding.weight.T
    """,
    """\
    x = self.token_embedding(ids)
    x = x + self.position_embedding(np.arange(seq_len).reshape(1, seq_len))
    mask = self._create_causal_mask(seq_len)
    for i in range(len(self.blocks)):
        x = self.blocks[i](x, mask=mask)
    x = self.ln_f(x)
    if self.lm_head is None:
        return x.matmul(self.token_embedding.weight.transpose())
    return self.lm_head(x)
    """,
    """\
    pos_ids = np.tile(np.arange(seq_len), (batch, 1))
    hidden = self.position_embedding(pos_ids) + self.token_embedding(ids)
    attn_mask = self._create_causal_mask(seq_len)
    for layer in self.blocks:
        hidden = layer(hidden, attn_mask)
    normed = self.ln_f(hidden)
    if self.lm_head is None:
        logits = normed @ self.token_embedding.weight.transpose()
    else:
        logits = self.lm_head(normed)
    return logits
    """,
    """\
    mask = self._create_causal_mask(seq_len)
    where = np.arange(seq_len)[np.newaxis, :]
    out = self.token_embedding(ids) + self.position_embedding(where)
    for b in self.blocks:
        out = b(out, mask)
    out = self.ln_f(out)
    return out @ self.token_embedding.weight.T if self.lm_head is None else self.lm_head(out)
    """,
    """\
    def embed(token_ids):
        t = np.arange(token_ids.shape[1])
        return self.token_embedding(token_ids) + self.position_embedding(t)

    stream = embed(ids)
    causal = self._create_causal_mask(seq_len)
    for block in self.blocks:
        stream = block(stream, mask=causal)
    final = self.ln_f(stream)
    head = self.lm_head
    return head(final) if head is not None else final @ self.token_embedding.weight.T
    """,
    """\
    positions = np.broadcast_to(np.arange(seq_len), (batch, seq_len))
    embeddings = self.token_embedding(ids)
    embeddings = embeddings + self.position_embedding(positions)
    m = self._create_causal_mask(seq_len)
    result = embeddings
    for transformer_block in self.blocks:
        result = transformer_block.forward(result, m)
    result = self.ln_f.forward(result)
    if self.lm_head is None:
        w = self.token_embedding.weight
        return result @ w.T
    return self.lm_head.forward(result)
    """,
    """\
    x = self.token_embedding(ids) + self.position_embedding(list(range(seq_len)))
    causal_mask = self._create_causal_mask(seq_len)
    layer_index = 0
    while layer_index < len(self.blocks):
        x = self.blocks[layer_index](x, causal_mask)
        layer_index += 1
    x = self.ln_f(x)
    tied = self.lm_head is None
    return (x @ self.token_embedding.weight.T) if tied else self.lm_head(x)
    """,
    """\
    seq = np.arange(seq_len)
    token_vectors = self.token_embedding(ids)
    position_vectors = self.position_embedding(seq[None, :])
    state = token_vectors + position_vectors
    mask_tensor = self._create_causal_mask(seq_len)
    for block_module in self.blocks:
        state = block_module(state, mask_tensor)
    state = self.ln_f(state)
    if self.lm_head:
        return self.lm_head(state)
    return state @ self.token_embedding.weight.T
    """,
]

MASK = [
    "return Tensor(causal_mask(seq_len))\n",
    "m = causal_mask(seq_len)\nreturn Tensor(m)\n",
    "return Tensor(np.triu(np.full((seq_len, seq_len), -np.inf), k=1))\n",
    "upper = np.triu(np.ones((seq_len, seq_len)), 1)\n"
    "return Tensor(np.where(upper == 1, -np.inf, 0.0))\n",
    "return Tensor(causal_mask(seq_len))\n",
    "blocked = np.tri(seq_len, k=-1).T.astype(bool)\n"
    "return Tensor(np.where(blocked, -np.inf, 0.0))\n",
    "return Tensor(causal_mask(seq_len))\n",
    "mask = causal_mask(seq_len)\nreturn Tensor(mask)\n",
]

HONEST = [
    tuple(textwrap.dedent(part[i]) for part in (LAYERNORM, MLP, BLOCK, SAMPLE, GPT_FORWARD, MASK))
    for i in range(8)
]


def reference() -> tuple[str, ...]:
    """The reference's six regions, dedented."""
    text = (PACKAGE_ROOT / MODULE.source).read_text()
    found = re.findall(r"### BEGIN SOLUTION\n(.*?)\n *### END SOLUTION", text, re.S)
    assert len(found) == len(REGIONS), found
    return tuple(textwrap.dedent(body) + "\n" for body in found)


# --- what copiers do to a text ------------------------------------------------------------------


def renamed(regions, names: dict[str, str]):
    """Local names replaced (whole words), as a student hiding a copy would."""

    def one(text):
        for old, new in names.items():
            text = re.sub(rf"(?<![.\w]){re.escape(old)}\b", new, text)
        return text

    return tuple(one(r) for r in regions)


def recommented(regions):
    """Every comment removed and a new one written above each region."""
    notes = ["normalise", "feed forward", "residual wiring", "draw tokens", "run the net", "mask"]
    out = []
    for note, text in zip(notes, regions):
        lines = [re.sub(r"\s+#.*$", "", line) for line in text.splitlines()]
        out.append(f"# my {note} code, step by step\n" + "\n".join(lines) + "\n")
    return tuple(out)


def respaced(regions):
    """Spaces around operators changed and blank lines added: what a formatter changes."""
    out = []
    for text in regions:
        text = re.sub(r" ([+\-*/]|==|<=|<) ", r"\1", text)
        out.append(text.replace("\n", "\n\n"))
    return tuple(out)


REFERENCE_NAMES = {
    "mean": "avg",
    "variance": "var_",
    "normalized": "xn",
    "kth": "cut",
    "probs": "weights",
    "cdf": "cum",
    "draws": "u",
    "positions": "pos",
    "block": "layer",
}

REFERENCE_REORDERED = (
    """\
variance = ((x - x.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
normalized = (x - mean) / (variance + self.eps) ** 0.5  # (..., C)
return self.beta + self.gamma * normalized
""",
    "return self.linear2(self.gelu(self.linear1(x)))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)\n",
    """\
if not self.norm_first:
    x = self.ln1(x + self.attention(x, mask))
    x = self.ln2(x + self.mlp(x))
else:
    x = x + self.attention(self.ln1(x), mask)  # (B, T, C)
    x = x + self.mlp(self.ln2(x))
""",
    """\
if temperature == 0:
    return logits.argmax(axis=-1)
logits = logits.astype(np.float64) / temperature
if top_k is not None and top_k < logits.shape[-1]:
    kth = np.partition(logits, -top_k, axis=-1)[:, -top_k, None]  # (B, 1)
    logits = np.where(logits < kth, -np.inf, logits)
probs = np.exp(logits - logits.max(axis=-1, keepdims=True))  # unnormalised, (B, V)
cdf = np.cumsum(probs, axis=-1)
draws = rng.random((len(logits), 1)) * cdf[:, -1:]  # one uniform per row, scaled to the total
return np.minimum((cdf <= draws).sum(axis=-1), logits.shape[-1] - 1)
""",
    """\
mask = self._create_causal_mask(seq_len)  # (T, T)
positions = np.arange(seq_len)[None]  # (1, T)
x = self.token_embedding(ids) + self.position_embedding(positions)  # (B, T, C)
for block in self.blocks:
    x = block(x, mask=mask)
x = self.ln_f(x)  # (B, T, C)
if self.lm_head is not None:
    return self.lm_head(x)  # (B, T, vocab_size)
return x @ self.token_embedding.weight.T  # (B, T, vocab_size), tied weights
""",
    "return Tensor(causal_mask(seq_len))  # module 12 builds it; one definition\n",
)


def students() -> tuple[dict[str, tuple[str, ...]], list[set[str]]]:
    """name -> six regions, and the groups of copies (the reference is `(reference)`)."""
    ref = reference()
    honest = {f"honest{i + 1}": HONEST[i] for i in range(7)}
    one_function = list(HONEST[7])
    one_function[3] = HONEST[3][3]  # honest8 copied honest4's sample_next, wrote the rest
    made = {
        **honest,
        "honest8": tuple(one_function),
        "refcopy": ref,
        "refcopy2": ref,
        "refrenamed": renamed(ref, REFERENCE_NAMES),
        "refcomments": recommented(ref),
        "refreordered": REFERENCE_REORDERED,
        "refspaced": respaced(ref),
        "refdisguised": recommented(renamed(REFERENCE_REORDERED, REFERENCE_NAMES)),
        "copy1": renamed(HONEST[0], {"mu": "mean_", "centered": "c", "h": "z", "blk": "b"}),
        "copy2": HONEST[1],
        "copy3": recommented(HONEST[2]),
        "copy5": recommented(renamed(HONEST[4], {"stream": "s", "final": "y", "t": "r"})),
        "copy6": renamed(HONEST[5], {"embeddings": "e", "result": "out", "centred": "c0"}),
    }
    groups = [
        {"(reference)", *(n for n in made if n.startswith("ref"))},
        {"honest1", "copy1"},
        {"honest2", "copy2"},
        {"honest3", "copy3"},
        {"honest4", "honest8"},
        {"honest5", "copy5"},
        {"honest6", "copy6"},
    ]
    return made, groups


def filled(regions) -> nbformat.NotebookNode:
    """The release notebook with each stub replaced by a region, at the stub's indent."""
    release = notebooks.student_notebook(MODULE, PACKAGE_ROOT / MODULE.source)
    pending = list(regions)
    stub = re.compile(r"^( *)# TODO: your code here.*\n *raise NotImplementedError\(.*\)$", re.M)
    for cell in release.cells:
        if cell.cell_type != "code":
            continue

        def fill(match):
            return textwrap.indent(pending.pop(0).rstrip("\n"), match.group(1))

        cell.source = stub.sub(fill, cell.source)
    assert not pending, "the release has fewer stubs than regions"
    return release


def build(course) -> list[set[str]]:
    """Write the class into course/submitted/; return the groups of copies."""
    made, groups = students()
    for name, regions in made.items():
        folder = course / "submitted" / name / MODULE.name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(filled(regions), folder / f"{MODULE.slug}.ipynb")
    return groups
