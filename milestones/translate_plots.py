"""PNG plots of the translate milestone: alignment, self-attention, pre- against post-norm."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _written(tokens: list[str]) -> list[str]:
    """The generated tokens up to and including the end token."""
    return tokens[: tokens.index("</s>") + 1] if "</s>" in tokens else tokens


def _heatmap(ax, weights, rows: list[str], columns: list[str], title: str) -> None:
    ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_title(title, fontsize=8)


def alignment(maps: dict, path: Path) -> Path:
    """Cross-attention, averaged over heads: one column per example, one row per decoder layer.

    Row t is the step that wrote token t; its weights say which source words it read.
    """
    layers, count = len(maps["cross"]), len(maps["source"])
    fig, axes = plt.subplots(
        layers, count, figsize=(3.2 * count + 0.5, 2.6 * layers + 0.6), squeeze=False
    )
    for e, (source, written) in enumerate(zip(maps["source"], maps["written"])):
        rows = _written(written)
        for layer, weights in enumerate(maps["cross"]):
            mean = weights[e, :, : len(rows), : len(source)].mean(axis=0)  # (T, S)
            digits = "".join(rows).replace("</s>", "")
            _heatmap(axes[layer][e], mean, rows, source, f"{digits}: decoder layer {layer}")
    fig.suptitle(
        "cross-attention (mean over heads): row = token written, column = source word read",
        fontsize=9,
    )
    return _save(fig, path)


def self_attention(maps: dict, path: Path) -> Path:
    """Every head of every layer on the longest example: encoder on the left, decoder right."""
    e = int(np.argmax([len(s) for s in maps["source"]]))
    source, rows = maps["source"][e], _written(maps["written"][e])
    inputs = ["<s>"] + rows[:-1]  # the decoder's query at position t reads token t
    layers, heads = len(maps["encoder_self"]), maps["encoder_self"][0].shape[1]
    fig, axes = plt.subplots(
        layers, 2 * heads, figsize=(2.1 * 2 * heads + 0.5, 2.3 * layers + 0.6), squeeze=False
    )
    for layer in range(layers):
        enc = maps["encoder_self"][layer][e, :, : len(source), : len(source)]  # (H, S, S)
        dec = maps["decoder_self"][layer][e, :, : len(inputs), : len(inputs)]  # (H, T, T)
        for h in range(heads):
            _heatmap(axes[layer][h], enc[h], source, source, f"encoder L{layer} head {h}")
            _heatmap(axes[layer][heads + h], dec[h], inputs, inputs, f"decoder L{layer} head {h}")
    fig.suptitle(
        f"self-attention per layer and head on '{' '.join(source)}' (row: query, column: key)",
        fontsize=9,
    )
    return _save(fig, path)


def norm_comparison(histories, path: Path) -> Path:
    """Training loss and held-out exact match per step for each norm placement."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for h in histories:
        loss = np.asarray(h.loss)
        window = max(1, len(loss) // 25)
        smooth = np.convolve(loss, np.ones(window) / window, mode="valid")
        left.semilogy(np.arange(window, len(loss) + 1), smooth, label=f"{h.label} (lr {h.lr:.0e})")
        if h.accuracy:
            steps, acc = zip(*h.accuracy)
            right.plot(steps, acc, "o-", label=h.label)
    left.set(xlabel="step", ylabel="cross-entropy (nats, running mean)", title="training loss")
    right.set(xlabel="step", ylabel="exact match", ylim=(-0.02, 1.02), title="held-out numbers")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    return _save(fig, path)
