"""PNG plots of a milestone run (matplotlib with the Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from tinytorch.core.training import write_atomic  # noqa: E402


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    write_atomic(path, lambda handle: fig.savefig(handle, format="png", dpi=110))
    plt.close(fig)
    return path


def loss_curves(train: list[float], val: list[tuple[int, float]], path: Path) -> Path:
    """Training loss per step (and its running mean) with the validation loss points."""
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = np.arange(1, len(train) + 1)
    ax.plot(steps, train, color="tab:blue", alpha=0.3, label="train (per step)")
    if len(train) >= 10:
        window = max(2, len(train) // 25)
        smooth = np.convolve(train, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1 :], smooth, color="tab:blue", label=f"train (mean of {window})")
    if val:
        vs, vl = zip(*val)
        ax.plot(vs, vl, "o-", color="tab:orange", label="validation")
    ax.set(xlabel="step", ylabel="cross-entropy (nats)", title="GPT training loss")
    ax.legend()
    return _save(fig, path)


def attention_heatmaps(weights: list[np.ndarray], tokens: list[str], path: Path) -> Path:
    """One heatmap per (layer, head) from (1, heads, T, T) weight arrays, one row per layer."""
    layers, heads = len(weights), weights[0].shape[1]
    fig, axes = plt.subplots(
        layers, heads, figsize=(2.2 * heads + 1, 2.2 * layers + 0.5), squeeze=False
    )
    labels = ["·" if t == " " else repr(t)[1:-1] for t in tokens]  # show spaces and newlines
    for i, w in enumerate(weights):
        for h in range(heads):
            ax = axes[i][h]
            ax.imshow(w[0, h], cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_title(f"layer {i} head {h}", fontsize=8)
            ticks = range(len(labels))
            ax.set_xticks(ticks, labels, fontsize=6)
            ax.set_yticks(ticks, labels, fontsize=6)
    fig.suptitle("attention weights (row: query, column: key)", fontsize=9)
    return _save(fig, path)


def scaling_curves(params: list[dict], memory: list[dict], path: Path) -> Path:
    """Left: parameters per size, formula vs exact. Right: attention bytes vs sequence length."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [row["name"] for row in params]
    x = np.arange(len(names))
    left.semilogy(x, [r["course_formula"] for r in params], "o--", label="12·L·d² + V·d")
    left.semilogy(x, [r["exact_formula"] for r in params], "s-", label="exact formula")
    built = [(i, r["built_count"]) for i, r in enumerate(params) if r["built_count"]]
    if built:
        bx, by = zip(*built)
        left.semilogy(bx, by, "k*", markersize=11, label="built and counted")
    left.set_xticks(x, names, rotation=20, fontsize=8)
    left.set(ylabel="parameters", title="parameter scaling")
    left.legend(fontsize=8)
    t = [r["seq_len"] for r in memory]
    right.loglog(t, [r["predicted_bytes"] for r in memory], "--", label="B·H·T²·4 predicted")
    right.loglog(t, [r["measured_bytes"] for r in memory], "o", label="last_attention.nbytes")
    right.set_xticks(t, [str(v) for v in t])
    right.minorticks_off()
    right.set(xlabel="sequence length T", ylabel="bytes per layer", title="attention memory")
    right.legend(fontsize=8)
    return _save(fig, path)


def reversal_attention(weights: np.ndarray, tokens: list[str], path: Path) -> Path:
    """The heads of one layer on one reversal example: the anti-diagonal is the learned rule."""
    return attention_heatmaps([weights], tokens, path)
