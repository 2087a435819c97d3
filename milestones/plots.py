"""PNG plots of a milestone run (matplotlib with the Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from tinytorch.core.checkpoint import write_atomic  # noqa: E402


def _save(fig, path: Path) -> Path:
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    write_atomic(path, lambda handle: fig.savefig(handle, format="png", dpi=110))
    plt.close(fig)
    return path


def keep_apart(fig, labels: list) -> None:
    """Move annotations (offset in points) up, each past those before it, until none overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed = []
    for label in labels:
        box = label.get_window_extent(renderer)
        while any(box.overlaps(other) for other in placed):
            x, y = label.xyann
            label.xyann = (x, y + 2 + box.height * 72 / fig.dpi)  # one line higher, in points
            box = label.get_window_extent(renderer)
        placed.append(box)


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


def token_label(token: str) -> str:
    """A token as a tick label: quoted, so that `__` or `,` reads as text, with the space,
    tab and newline drawn as visible marks and `$` kept out of matplotlib's maths mode."""
    visible = token.replace(" ", "·").replace("\t", "→").replace("\n", "↵").replace("$", r"\$")
    return f"'{visible}'"


def attention_figure(weights: list[np.ndarray], tokens: list[str]):
    """One heatmap per (layer, head) from (1, heads, T, T) weight arrays, one row per layer,
    the tokens as tick labels (keys upright, along x), and one colour bar for all."""
    layers, heads = len(weights), weights[0].shape[1]
    size = max(2.4, 0.22 * len(tokens) + 1.0)  # room for one upright label per key
    fig, axes = plt.subplots(
        layers, heads, figsize=(size * heads + 1.2, size * layers + 0.6), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    labels = [token_label(t) for t in tokens]
    ticks = range(len(labels))
    for i, w in enumerate(weights):
        for h in range(heads):
            ax = axes[i][h]
            image = ax.imshow(w[0, h], cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_title(f"layer {i} head {h}", fontsize=8)
            ax.set_xticks(ticks, labels, fontsize=7, family="monospace", rotation=90)
            ax.set_yticks(ticks, labels, fontsize=7, family="monospace")
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    fig.suptitle("attention weights (row: query, column: key)", fontsize=9)
    return fig


def attention_heatmaps(weights: list[np.ndarray], tokens: list[str], path: Path) -> Path:
    return _save(attention_figure(weights, tokens), path)


def scaling_figure(params: list[dict], memory: list[dict]):
    """Left: parameters of each model size (separate models: markers, no line between them),
    the course formula as large open circles around the exact count's dots. Right: attention
    bytes against sequence length, the predicted curve and the measured points."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    names = [row["name"] for row in params]
    x = np.arange(len(names))
    left.semilogy(
        x, [r["course_formula"] for r in params], "o", linestyle="none", markersize=13,
        markerfacecolor="none", markeredgewidth=1.5, color="tab:blue", label="12·L·d² + V·d",
    )  # fmt: skip
    left.semilogy(
        x, [r["exact_formula"] for r in params], "o", linestyle="none", markersize=5,
        color="tab:orange", label="exact formula",
    )  # fmt: skip
    built = [(i, r["built_count"]) for i, r in enumerate(params) if r["built_count"]]
    if built:
        bx, by = zip(*built)
        left.semilogy(bx, by, "k+", linestyle="none", markersize=16, label="built and counted")
    left.set_xticks(x, names, rotation=20, fontsize=8)
    left.set_xlim(-0.6, len(names) - 0.4)
    left.set(ylabel="parameters", title="parameter scaling (one point per model)")
    left.legend(fontsize=8)
    t = [r["seq_len"] for r in memory]
    right.loglog(t, [r["predicted_bytes"] for r in memory], "--", label="B·H·T²·4 predicted")
    right.loglog(
        t, [r["measured_bytes"] for r in memory], "o", linestyle="none",
        label="last_attention.nbytes",
    )  # fmt: skip
    right.set_xticks(t, [str(v) for v in t])
    right.minorticks_off()
    right.set(xlabel="sequence length T", ylabel="bytes per layer", title="attention memory")
    right.legend(fontsize=8)
    return fig


def scaling_curves(params: list[dict], memory: list[dict], path: Path) -> Path:
    return _save(scaling_figure(params, memory), path)


def reversal_attention(weights: np.ndarray, tokens: list[str], path: Path) -> Path:
    """The heads of one layer on one reversal example: the anti-diagonal is the learned rule."""
    return attention_heatmaps([weights], tokens, path)
