# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Module 16 — Compression: fewer numbers
#
# Quantization (module 15) keeps every weight and stores each in fewer bits. This module keeps
# fewer weights. Three ideas, each with its own trade:
#
# 1. **Pruning.** Many trained weights are close to zero; setting the smallest to exactly zero
#    (**magnitude pruning**) changes the output little. Unstructured pruning may zero any single
#    weight, per layer or with one **global** threshold; the matrices keep their shapes, so it
#    only saves memory when stored sparse, and time only with sparse kernels. **Structured**
#    pruning removes whole units (an MLP's hidden neurons, attention heads): the matrices really
#    shrink, and a dense GEMM gets faster at once.
# 2. **Low rank.** A weight matrix `W (in, out)` is replaced by a product `A (in, r) @ B (r, out)`
#    from its singular value decomposition: `r (in + out)` numbers instead of `in x out`, and the
#    best such product there is (Eckart and Young).
# 3. **Distillation.** A smaller model is *trained* to imitate the larger one's whole output
#    distribution, softened by a temperature, not only its top choice.
#
# Every method is measured the same way: how many numbers, how many bytes, and what it does to
# bits per character on the GPT of `tito milestone run gpt` (`tito milestone run compress`).

# %%
#| default_exp compress.pruning

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
"""Magnitude pruning (per layer, global) and structured pruning of heads and neurons (module 16)."""

from __future__ import annotations

import numpy as np

from tinytorch.core.attention import MultiHeadAttention
from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import Tensor


def _fraction(sparsity) -> float:
    if (
        isinstance(sparsity, bool)
        or not isinstance(sparsity, (int, float))
        or not 0 <= sparsity < 1
    ):
        raise ValueError(
            f"sparsity is the fraction of weights to zero, in [0, 1); got {sparsity!r}"
        )
    return float(sparsity)


def linears(model: Module) -> list[tuple[str, Linear]]:
    """(dotted name, layer) for every Linear below `model`, each once: what pruning may touch."""
    found, seen = [], set()

    def walk(module, prefix):
        for name, value in module.children():
            if isinstance(value, Module) and id(value) not in seen:
                seen.add(id(value))
                if isinstance(value, Linear):
                    found.append((prefix + name, value))
                walk(value, f"{prefix}{name}.")

    walk(model, "")
    return found


# %% [markdown]
# ## 1. Magnitude pruning
#
# `magnitude_mask(w, sparsity)` is a boolean array of `w`'s shape: False for the
# `round(sparsity * w.size)` weights of smallest absolute value, True for the rest. Exactly that
# many, even when several weights tie at the threshold: `np.argpartition` of `|w|` gives the
# indices of the k smallest without sorting everything.
#
# `prune(model, sparsity, scope)` zeroes the weights of every `Linear` (not the embeddings, the
# norms or the biases: they are few and matter much) and returns the masks by name:
#
# - `scope="layer"`: every layer loses the same fraction;
# - `scope="global"`: one threshold over all those weights together, so a layer whose weights are
#   small loses more of them. At the same overall sparsity this usually hurts less: it removes
#   what is smallest anywhere.
#
# `sparsity_of(model)` measures the fraction of those weights that are zero.


# %% nbgrader={"grade": false, "grade_id": "magnitude", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def magnitude_mask(w, sparsity: float) -> np.ndarray:
    """True where a weight survives: all but the round(sparsity * size) smallest |w|."""
    w = np.asarray(getattr(w, "data", w))
    drop = int(round(_fraction(sparsity) * w.size))
    mask = np.ones(w.size, dtype=bool)
    ### BEGIN SOLUTION
    if drop:
        mask[np.argpartition(np.abs(w).reshape(-1), drop - 1)[:drop]] = False
    ### END SOLUTION
    return mask.reshape(w.shape)


def prune(model: Module, sparsity: float, scope: str = "global") -> dict[str, np.ndarray]:
    """Zero the smallest Linear weights of `model` in place; returns {layer name: mask}."""
    if scope not in ("global", "layer"):
        raise ValueError(f"scope must be 'global' (one threshold) or 'layer', got {scope!r}")
    layers = linears(model)
    ### BEGIN SOLUTION
    if scope == "layer":
        masks = {name: magnitude_mask(m.weight.data, sparsity) for name, m in layers}
    else:
        flat = np.concatenate([m.weight.data.reshape(-1) for _, m in layers])
        keep = magnitude_mask(flat, sparsity)
        masks, start = {}, 0
        for name, m in layers:
            masks[name] = keep[start : start + m.weight.size].reshape(m.weight.shape)
            start += m.weight.size
    for name, m in layers:
        m.weight.data *= masks[name]
    ### END SOLUTION
    return masks


def sparsity_of(model: Module) -> float:
    """Measured fraction of the Linear weights of `model` that are exactly zero."""
    weights = [m.weight.data for _, m in linears(model)]
    return sum(int((w == 0).sum()) for w in weights) / sum(w.size for w in weights)


# %% [markdown]
# ## 2. What a sparse matrix really takes
#
# A pruned matrix stored densely takes the same bytes as before. Stored sparse, it needs its
# surviving values and where they are. `pack_sparse(w)` keeps a bitmask (one bit per position,
# `np.packbits`) and the non-zero values as float32: `size / 8 + 4 * nonzeros` bytes, against
# `4 * size` dense. At 50 % sparsity that is 53 % of the dense bytes, at 80 % 23 %; the
# milestone measures it on the packed arrays. (CSR, with a 32-bit column index per value, would
# cost more than dense at 50 %.) Given.


# %% nbgrader={"grade": false, "grade_id": "packing", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export
def pack_sparse(w) -> tuple[np.ndarray, np.ndarray]:
    """(bitmask as packed uint8, non-zero values as float32) of a pruned matrix."""
    w = np.asarray(getattr(w, "data", w))
    return np.packbits(w.reshape(-1) != 0), w.reshape(-1)[w.reshape(-1) != 0].astype(np.float32)


def unpack_sparse(bits: np.ndarray, values: np.ndarray, shape) -> np.ndarray:
    """The dense float32 matrix of `pack_sparse`."""
    size = int(np.prod(shape))
    keep = np.unpackbits(bits)[:size].astype(bool)
    out = np.zeros(size, dtype=np.float32)
    out[keep] = values
    return out.reshape(shape)


def sparse_bytes(model: Module) -> int:
    """Bytes of `model` with every Linear weight stored by pack_sparse, the rest dense."""
    total, seen = 0, set()
    sparse = {id(m.weight.data) for _, m in linears(model)}
    for p in model.parameters():
        if id(p.data) in seen:
            continue
        seen.add(id(p.data))
        total += sum(a.nbytes for a in pack_sparse(p)) if id(p.data) in sparse else p.data.nbytes
    return total


# %% [markdown]
# ## 3. Structured pruning: smaller matrices
#
# **MLP neurons.** Hidden unit `j` of module 13's MLP reads column `j` of `linear1` and writes row
# `j` of `linear2`. Its importance here is the product of the two norms, `|W1[:, j]| |W2[j, :]|`
# (how strongly it can be driven times how much it writes). `prune_neurons(mlp, keep)` keeps the
# `keep` most important units, in their original order, by building **smaller** `Linear`s:
# `linear1` `(C, keep)` from the kept columns and bias entries, `linear2` `(keep, C)` from the kept
# rows. Removing a unit is the same as zeroing its column and row, so the smaller MLP computes
# exactly what the masked big one computes (the test checks this).
#
# **Attention heads.** Head `h` owns columns `h D .. (h + 1) D` of `q_proj`, `k_proj`, `v_proj` and
# the same rows of `out_proj`. `PrunedAttention(attention, heads)` keeps the heads listed:
# projections to `len(heads) * D` features and an `out_proj` from them. Its importance measure,
# `head_importance`, is the norm of what a head can write: its `v_proj` columns times its
# `out_proj` rows. (Module 17's cached attention merges its heads to `H * D` columns, so a
# head-pruned GPT generates with the KV cache as well as without it.)


# %% nbgrader={"grade": false, "grade_id": "structured", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _sub_linear(layer: Linear, rows=slice(None), cols=slice(None)) -> Linear:
    """A new Linear holding `layer.weight[rows][:, cols]` and `layer.bias[cols]`."""
    w = layer.weight.data[rows][:, cols]
    out = Linear(w.shape[0], w.shape[1], bias=layer.bias is not None)
    out.weight.data = np.ascontiguousarray(w)
    if layer.bias is not None:
        out.bias.data = layer.bias.data[cols].copy()
    return out


def prune_neurons(mlp: Module, keep: int) -> np.ndarray:
    """Keep the `keep` most important hidden units of `mlp` (in place); returns their indices."""
    hidden = mlp.linear1.out_features
    if not isinstance(keep, (int, np.integer)) or not 1 <= keep <= hidden:
        raise ValueError(
            f"keep must be a whole number of hidden units in [1, {hidden}], got {keep!r}"
        )
    ### BEGIN SOLUTION
    importance = np.linalg.norm(mlp.linear1.weight.data, axis=0) * np.linalg.norm(
        mlp.linear2.weight.data, axis=1
    )
    kept = np.sort(np.argsort(importance)[::-1][:keep])
    mlp.linear1 = _sub_linear(mlp.linear1, cols=kept)
    mlp.linear2 = _sub_linear(mlp.linear2, rows=kept)
    ### END SOLUTION
    return kept


def head_importance(attention: MultiHeadAttention) -> np.ndarray:
    """(num_heads,) norms of what each head can write: |v_proj columns| x |out_proj rows|."""
    d = attention.head_dim
    v = attention.v_proj.weight.data.reshape(attention.embed_dim, -1, d)  # (E, H, D)
    out = attention.out_proj.weight.data.reshape(-1, d, attention.embed_dim)  # (H, D, E)
    return np.linalg.norm(v, axis=(0, 2)) * np.linalg.norm(out, axis=(1, 2))


class PrunedAttention(MultiHeadAttention):
    """Module 12's attention with only some heads: q, k, v project to len(heads) * head_dim."""

    def __init__(self, attention: MultiHeadAttention, heads):
        heads, count = sorted(int(h) for h in heads), attention.num_heads
        if not heads or len(set(heads)) != len(heads) or not 0 <= heads[0] <= heads[-1] < count:
            raise ValueError(
                f"heads must be distinct head numbers in [0, {count - 1}], at least one; got {heads}"
            )
        self.embed_dim, self.head_dim = attention.embed_dim, attention.head_dim
        self.num_heads, self.heads = len(heads), heads
        self.keep_attention, self.last_attention = attention.keep_attention, None
        d = self.head_dim
        ### BEGIN SOLUTION
        cols = np.concatenate([np.arange(h * d, (h + 1) * d) for h in heads])
        self.q_proj = _sub_linear(attention.q_proj, cols=cols)
        self.k_proj = _sub_linear(attention.k_proj, cols=cols)
        self.v_proj = _sub_linear(attention.v_proj, cols=cols)
        self.out_proj = _sub_linear(attention.out_proj, rows=cols)
        ### END SOLUTION

    def _merge_heads(self, out: Tensor) -> Tensor:
        batch, _, steps, _ = out.shape  # (B, H_kept, T, D) -> (B, T, H_kept * D)
        merged = out.permute(0, 2, 1, 3).reshape(batch, steps, self.num_heads * self.head_dim)
        return self.out_proj(merged)

    def __repr__(self):
        return f"PrunedAttention(embed_dim={self.embed_dim}, heads={self.heads})"


def prune_structure(gpt: Module, head_fraction: float = 0.5, neuron_fraction: float = 0.5) -> None:
    """Remove the least important fraction of heads and MLP neurons of every block, in place."""
    for block in gpt.blocks:
        heads = block.attention.num_heads
        keep = max(1, round(heads * (1 - _fraction(head_fraction))))
        best = np.argsort(head_importance(block.attention))[::-1][:keep]
        block.attention = PrunedAttention(block.attention, best)
        hidden = block.mlp.linear1.out_features
        prune_neurons(block.mlp, max(1, round(hidden * (1 - _fraction(neuron_fraction)))))


# %% [markdown]
# ## 4. Low rank by SVD
#
# Any matrix is `W = U diag(S) Vᵀ` with singular values `S` in decreasing order. Keeping the first
# `r` of them gives the closest rank-`r` matrix in the Frobenius norm, and the error is exactly
# what was dropped (Eckart and Young):
#
#     |W - W_r|² = S[r]² + S[r+1]² + ...
#
# `low_rank(linear, rank)` returns a `LowRankLinear`: `first` a `Linear(in, r)` without bias
# holding `U[:, :r] sqrt(S[:r])`, then `second` a `Linear(r, out)` holding `sqrt(S[:r]) Vᵀ[:r]` and
# the original bias (the square root splits the scale evenly between the two). It saves numbers
# only when `r (in + out) < in x out`. Its `weight` property gives the product, for module 12's
# fused q/k/v projection, which reads `q_proj.weight` directly.
#
# `rank_for_energy(w, energy)` is the smallest rank whose singular values hold that share of
# `sum(S²)`: a way to choose `r` per layer.

# %% nbgrader={"grade": false, "grade_id": "lowrank-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export compress.lowrank
"""Low-rank factorisation of Linear layers by the singular value decomposition (module 16)."""

import copy

import numpy as np

from tinytorch.core.layers import Linear, Module
from tinytorch.core.tensor import Tensor


# %% nbgrader={"grade": false, "grade_id": "lowrank", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export compress.lowrank
class LowRankLinear(Module):
    """y = (x @ A) @ B + bias with A (in, rank), B (rank, out): a Linear of rank `rank`."""

    def __init__(self, first: Linear, second: Linear):
        self.first, self.second = first, second
        self.in_features, self.out_features = first.in_features, second.out_features
        self.rank = first.out_features

    def forward(self, x) -> Tensor:
        return self.second(self.first(x))

    @property
    def weight(self) -> Tensor:
        """The product A @ B (in, out), for code that reads a Linear's weight."""
        return Tensor(self.first.weight.data @ self.second.weight.data)

    @property
    def bias(self):
        return self.second.bias

    def __repr__(self):
        return f"LowRankLinear({self.in_features}, {self.out_features}, rank={self.rank})"


def low_rank(linear: Linear, rank: int) -> LowRankLinear:
    """The best rank-`rank` factorisation of `linear` (its SVD truncated), with its bias."""
    w = linear.weight.data
    if not isinstance(rank, (int, np.integer)) or not 1 <= rank <= min(w.shape):
        raise ValueError(
            f"rank must be a whole number in [1, {min(w.shape)}] for a {w.shape} weight, "
            f"got {rank!r}"
        )
    first = Linear(w.shape[0], rank, bias=False)
    second = Linear(rank, w.shape[1], bias=linear.bias is not None)
    ### BEGIN SOLUTION
    u, s, vt = np.linalg.svd(w.astype(np.float64), full_matrices=False)
    root = np.sqrt(s[:rank])
    first.weight.data = (u[:, :rank] * root).astype(w.dtype)  # (in, r)
    second.weight.data = (root[:, None] * vt[:rank]).astype(w.dtype)  # (r, out)
    ### END SOLUTION
    if linear.bias is not None:
        second.bias.data = linear.bias.data.copy()
    return LowRankLinear(first, second)


# %% nbgrader={"grade": false, "grade_id": "factorize", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export compress.lowrank
def rank_for_energy(w, energy: float = 0.9) -> int:
    """The smallest rank whose singular values hold `energy` of sum(S^2)."""
    s = np.linalg.svd(np.asarray(getattr(w, "data", w), dtype=np.float64), compute_uv=False)
    share = np.cumsum(s**2) / np.sum(s**2)
    return int(np.searchsorted(share, energy) + 1)


def factorize(model: Module, ratio: float = 0.5, skip=("lm_head",)) -> Module:
    """A copy of `model` with each Linear of rank min(in, out) * ratio, where that saves numbers."""
    if not 0 < ratio < 1:
        raise ValueError(f"ratio is the share of the full rank to keep, in (0, 1), got {ratio!r}")
    copied = copy.deepcopy(model)
    for name, layer in linears(copied):
        rank = max(1, int(min(layer.weight.shape) * ratio))
        if name in skip or rank * sum(layer.weight.shape) >= layer.weight.size:
            continue
        owner = copied
        *path, last = name.split(".")
        for part in path:
            owner = owner[int(part)] if isinstance(owner, list) else getattr(owner, part)
        setattr(owner, last, low_rank(layer, rank))
    return copied


# %% [markdown]
# ## 5. Distillation
#
# A small model trained on text learns from one-hot targets: the next character was `e`, all
# else is wrong. A trained large model knows more: after `th` the next is `e` with 60 %, `a` with
# 15 %, `i` with 10 %... Hinton, Vinyals and Dean's distillation trains the small model (the
# student) to match those probabilities, softened by a temperature `T` so the small ones count:
#
#     p_teacher = softmax(z_teacher / T),   p_student = softmax(z_student / T)
#     loss = alpha * T² * KL(p_teacher || p_student)  +  (1 - alpha) * cross_entropy(z_student, y)
#
# The KL term's gradient with respect to the student's logits is `(p_student - p_teacher) / T`.
# At a high temperature both distributions flatten towards uniform and their difference is about
# `(z_student - z_teacher) / (V T)`, so that gradient falls like `1 / T²`. The **T²** factor
# undoes it: the soft and hard terms keep their balance whatever `T` is (a test checks it).
# Both terms are means over the positions (rows of the flattened logits).
#
# `DistillationLoss` is one `Function`, forward and backward side by side. With `N` rows, `q` the
# softmax at temperature 1 and `Y` the one-hot targets, the gradient you derive is
#
#     d loss / d z_student = [alpha * T * (p_student - p_teacher) + (1 - alpha) * (q - Y)] / N
#
# and the teacher gets none: it is not being trained.

# %% nbgrader={"grade": false, "grade_id": "distill-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export compress.distillation
"""Knowledge distillation: a student trained on a teacher's softened logits (module 16)."""

import copy

import numpy as np

from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Function, ShapeError, Tensor
from tinytorch.core.training import train_step


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


# %% nbgrader={"grade": false, "grade_id": "distill-loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export compress.distillation
class DistillationLoss(Function):
    """alpha T² KL(softmax(t/T) || softmax(s/T)) + (1 - alpha) CE(s, y), means over rows."""

    def forward(self, student, teacher=None, targets=None, temperature=2.0, alpha=0.5):
        s = student.reshape(-1, student.shape[-1])  # (N, V)
        t = teacher.reshape(-1, teacher.shape[-1]).astype(s.dtype)
        y = np.asarray(targets).reshape(-1)
        n, temp = len(s), s.dtype.type(temperature)
        ### BEGIN SOLUTION
        log_ps, log_pt = _log_softmax(s / temp), _log_softmax(t / temp)
        p_t = np.exp(log_pt)
        kl = np.sum(p_t * (log_pt - log_ps)) / n
        log_q = _log_softmax(s)
        hard = -log_q[np.arange(n), y].sum() / n
        # kept for the backward
        self.p_s, self.p_t, self.q = np.exp(log_ps), p_t, np.exp(log_q)
        ### END SOLUTION
        self.y, self.temp, self.alpha, self.shape = y, temp, alpha, student.shape
        return np.asarray(alpha * temp * temp * kl + (1 - alpha) * hard, dtype=s.dtype)

    def backward(self, grad):
        n = len(self.y)
        ### BEGIN SOLUTION
        hard = self.q.copy()
        hard[np.arange(n), self.y] -= 1
        ds = self.alpha * self.temp * (self.p_s - self.p_t) + (1 - self.alpha) * hard
        ds *= grad / n
        ### END SOLUTION
        return (ds.reshape(self.shape),)


def distillation_loss(student_logits, teacher_logits, targets, temperature: float = 2.0,
                      alpha: float = 0.5) -> Tensor:  # fmt: skip
    """The distillation loss of student logits (..., V) against a teacher's and the targets."""
    s = student_logits if isinstance(student_logits, Tensor) else Tensor(student_logits)
    t = np.asarray(getattr(teacher_logits, "data", teacher_logits))
    y = np.asarray(getattr(targets, "data", targets))
    if t.shape != s.shape or y.shape != s.shape[:-1]:
        raise ShapeError(
            f"distillation_loss: student logits {s.shape}, teacher logits {t.shape} and targets "
            f"{y.shape} must agree: the same (..., V) logits and (...) targets"
        )
    if not temperature > 0 or not 0 <= alpha <= 1:
        raise ValueError(
            f"temperature must be > 0 and alpha in [0, 1], got {temperature} and {alpha}"
        )
    return DistillationLoss.apply(s, teacher=t, targets=y, temperature=temperature, alpha=alpha)


# %% [markdown]
# ## 6. Distilling a GPT into half of it
#
# The student is a GPT with half the blocks, the same width and vocabulary, started from the
# teacher: its embeddings, final norm and every other block (`half_size`, given: DistilBERT's
# trick, a better start than random weights). `distill_step` is one training step: the teacher's
# logits under `no_grad`, then module 07's `train_step` on the loss above (the student's logits
# with the graph, backward, the optimizer's step).


# %% nbgrader={"grade": false, "grade_id": "distill", "locked": true, "schema_version": 3, "solution": false, "task": false}
#| export compress.distillation
def half_size(teacher):
    """A GPT with every other block of `teacher` (copies), its embeddings and final norm."""
    student = copy.deepcopy(teacher)
    student.blocks = student.blocks[::2]
    student.config.num_layers = len(student.blocks)
    return student


def distill_step(student, teacher, x, y, optimizer, temperature: float = 2.0,
                 alpha: float = 0.5) -> float:  # fmt: skip
    """One step of `optimizer` on the distillation loss for the batch (x, y); returns the loss."""
    with no_grad():
        teacher_logits = teacher(x).data

    def loss_fn(student_logits, targets):
        return distillation_loss(student_logits, teacher_logits, targets, temperature, alpha)

    return train_step(student, loss_fn, optimizer, x, y)  # module 07's step


# %% [markdown]
# ## Try it

# %%
from tinytorch.core.autograd import no_grad as quiet
from tinytorch.core.transformer import GPT

np.random.seed(0)
gpt = GPT(vocab_size=40, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=16)
tokens = np.random.default_rng(1).integers(0, 40, size=(2, 16))
with quiet():
    reference = gpt(tokens).data
for fraction in (0.5, 0.8):
    pruned = copy.deepcopy(gpt)
    prune(pruned, fraction)
    with quiet():
        gap = np.abs(pruned(tokens).data - reference).max()
    print(f"{fraction:.0%} pruned: measured sparsity {sparsity_of(pruned):.3f}, "
          f"sparse bytes {sparse_bytes(pruned):,} of {4 * gpt.num_parameters():,}, logit gap {gap:.3f}")  # fmt: skip
slim = copy.deepcopy(gpt)
prune_structure(slim, 0.5, 0.5)
print(f"heads and neurons halved: {slim.num_parameters():,} of {gpt.num_parameters():,} parameters")

# %% [markdown]
# ## Tests
# Each graded cell is a probe (`@graded`): it runs on a seeded generator, asserts what must hold,
# and returns the numbers a grader compares with the reference's.

# %% nbgrader={"grade": false, "grade_id": "test-imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import copy

from tinytorch.checks import graded
from tinytorch.core.attention import MultiHeadAttention, causal_mask
from tinytorch.core.autograd import no_grad, numerical_gradient
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor, precision
from tinytorch.core.transformer import MLP


# %% nbgrader={"grade": true, "grade_id": "test-magnitude", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=0, atol=0, grades="magnitude")
def test_magnitude_pruning_per_layer_and_global(rng):
    w = rng.normal(size=(10, 7))
    mask = magnitude_mask(w, 0.3)
    assert mask.sum() == 70 - 21
    assert np.abs(w[~mask]).max() <= np.abs(w[mask]).min()
    np.random.seed(int(rng.integers(1000)))
    mlp = MLP(8, 16)
    mlp.linear2.weight.data *= 0.1  # a layer of small weights
    layer_masks = prune(copy.deepcopy(mlp), 0.5, scope="layer")
    assert all(m.mean() == 0.5 for m in layer_masks.values())
    global_masks = prune(mlp, 0.5, scope="global")
    assert global_masks["linear2"].mean() < 0.5 < global_masks["linear1"].mean()  # one threshold
    assert sparsity_of(mlp) == 0.5
    assert np.all(mlp.linear2.weight.data[~global_masks["linear2"]] == 0)
    return {"mask": mask, "global": global_masks["linear2"], "layer": layer_masks["linear1"]}


# %% nbgrader={"grade": true, "grade_id": "test-structured", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-5, atol=1e-6, grades="structured")
def test_structured_pruning_equals_masking_and_shrinks(rng):
    np.random.seed(int(rng.integers(1000)))
    x = rng.normal(size=(2, 5, 8)).astype(np.float32)
    mlp = MLP(8, 12)
    masked = copy.deepcopy(mlp)
    kept = prune_neurons(mlp, 5)
    dropped = np.setdiff1d(np.arange(12), kept)
    masked.linear1.weight.data[:, dropped] = 0
    masked.linear1.bias.data[dropped] = 0
    masked.linear2.weight.data[dropped] = 0
    assert mlp.linear1.weight.shape == (8, 5) and mlp.linear2.weight.shape == (5, 8)
    with no_grad():
        np.testing.assert_allclose(mlp(x).data, masked(x).data, rtol=1e-5, atol=1e-6)
        attention = MultiHeadAttention(8, 4)
        slim = PrunedAttention(attention, [0, 2])
        attention.out_proj.weight.data[2:4] = 0  # heads 1 and 3 write nothing
        attention.out_proj.weight.data[6:8] = 0
        mask = causal_mask(5)
        expected = attention(x, mask).data
        np.testing.assert_allclose(slim(x, mask).data, expected, rtol=1e-5, atol=1e-6)
    assert slim.q_proj.weight.shape == (8, 4) and slim.out_proj.weight.shape == (4, 8)
    return {"mlp": mlp(x).data, "heads": slim(x, mask).data, "kept": kept}


# %% nbgrader={"grade": true, "grade_id": "test-lowrank", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@graded(rtol=1e-4, atol=1e-5, grades="lowrank")
def test_low_rank_is_the_truncated_svd(rng):
    np.random.seed(int(rng.integers(1000)))
    linear = Linear(12, 9)
    s = np.linalg.svd(linear.weight.data.astype(np.float64), compute_uv=False)
    out = {}
    for rank in (2, 5):
        factored = low_rank(linear, rank)
        assert factored.first.weight.shape == (12, rank)
        assert factored.second.weight.shape == (rank, 9)
        error = np.sum((factored.weight.data - linear.weight.data) ** 2)
        np.testing.assert_allclose(error, np.sum(s[rank:] ** 2), rtol=1e-4, atol=1e-5)
        out[f"w{rank}"] = factored.weight.data
    full = low_rank(linear, 9)
    x = rng.normal(size=(3, 12)).astype(np.float32)
    np.testing.assert_allclose(full(x).data, linear(x).data, rtol=1e-4, atol=1e-5)
    return out


# %% nbgrader={"grade": true, "grade_id": "test-distill", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def distillation_probe(rng):
    s = rng.normal(size=(2, 3, 5))
    t = rng.normal(size=(2, 3, 5)) * 2
    y = rng.integers(0, 5, size=(2, 3))
    temp, alpha = 2.5, 0.7
    student = Tensor(s, requires_grad=True)
    loss = distillation_loss(student, t, y, temp, alpha)
    loss.backward()
    rows, ts, yy = s.reshape(6, 5), t.reshape(6, 5), y.reshape(6)
    p_t, log_ps = np.exp(_log_softmax(ts / temp)), _log_softmax(rows / temp)
    kl = np.sum(p_t * (np.log(p_t) - log_ps)) / 6
    hard = -_log_softmax(rows)[np.arange(6), yy].mean()
    np.testing.assert_allclose(
        loss.data, alpha * temp**2 * kl + (1 - alpha) * hard, rtol=1e-5, atol=1e-7
    )
    nudged = s.copy()  # module 05's central differences of the loss, nudging `nudged` in place
    numeric = numerical_gradient(
        lambda: float(distillation_loss(nudged, t, y, temp, alpha).data), nudged, h=1e-5
    )
    np.testing.assert_allclose(student.grad, numeric, rtol=1e-4, atol=1e-6)
    return {"loss": loss.data, "grad": student.grad}


@graded(rtol=1e-5, atol=1e-7, grades="distill-loss")
def test_distillation_loss_and_its_gradient(rng):
    with precision(np.float64):  # finite differences need float64
        return distillation_probe(rng)
