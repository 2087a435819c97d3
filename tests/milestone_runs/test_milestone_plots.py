"""What the milestone plots show, read back from the figure objects before they are saved."""

import numpy as np
from matplotlib.colors import to_rgba

from milestones import plots

TOKENS = ["The", " ", "__", "init", "__", "()", "\n", "$x$", ","]


def attention(layers=2, heads=2, t=None):
    t = t or len(TOKENS)
    rng = np.random.default_rng(0)
    w = rng.random((layers, 1, heads, t, t))
    return list(np.tril(w) / np.tril(w).sum(-1, keepdims=True))


def test_attention_labels_are_quoted_tokens_upright_on_x_with_a_colour_bar():
    fig = plots.attention_figure(attention(), TOKENS)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == 4
    for ax in heatmaps:
        x = [label.get_text() for label in ax.get_xticklabels()]
        assert x == ["'The'", "'·'", "'__'", "'init'", "'__'", "'()'", "'↵'", r"'\$x\$'", "','"]
        assert all(label.get_rotation() == 90 for label in ax.get_xticklabels())
        assert ax.images[0].get_clim() == (0.0, 1.0)  # one scale, so one bar reads them all
    bars = [ax for ax in fig.axes if not ax.images]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight"
    assert heatmaps[-1].images[0].colorbar.ax is bars[0]


def test_attention_labels_do_not_overlap():
    fig = plots.attention_figure(attention(1, 2, 16), ["word"] * 16)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:2]:
        boxes = [label.get_window_extent(renderer) for label in ax.get_xticklabels()]
        assert all(a.x1 <= b.x0 + 0.5 for a, b in zip(boxes, boxes[1:]))


def scaling():
    names = ["this model", "gpt2-small", "gpt3"]
    params = [
        {"name": n, "course_formula": c, "exact_formula": e, "built_count": b}
        for n, c, e, b in zip(names, (25e3, 123e6, 174e9), (26e3, 124e6, 175e9), (26e3, None, None))
    ]
    memory = [
        {"seq_len": t, "predicted_bytes": 8 * t * t, "measured_bytes": 8 * t * t} for t in (16, 32)
    ]
    return plots.scaling_figure(params, memory)


def test_scaling_shows_separate_models_as_points_and_both_formulas_visibly():
    left, right = scaling().axes
    course, exact, built = left.get_lines()
    for line in (course, exact, built):
        assert line.get_linestyle() == "None"  # no line joins models that are not a continuum
    assert (
        course.get_markerfacecolor() == "none"
        and course.get_markersize() > 2 * exact.get_markersize()
    )
    assert to_rgba(course.get_markeredgecolor()) != to_rgba(exact.get_markerfacecolor())
    assert [label.get_text() for label in left.get_legend().get_texts()] == [
        "12·L·d² + V·d", "exact formula", "built and counted",
    ]  # fmt: skip
    predicted, measured = right.get_lines()
    assert predicted.get_linestyle() == "--" and measured.get_linestyle() == "None"


def _boxes(fig, texts):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in texts if t.get_text()]


def _none_overlap(boxes):
    return not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_the_mlp_title_clears_the_labels_of_the_wrong_digits():
    """Issue 38: the title of mlp.png overprinted the first row of "7 read as 9" labels."""
    from milestones import mlp

    result = {"epochs": 3, "train_loss": [1.0, 0.5, 0.3], "test_accuracy_per_epoch": [0.9, 0.95,
              0.96], "wrong": list(range(20)), "predicted": np.zeros(400, dtype=int),
              "test_images": 360}  # fmt: skip
    fig = mlp.figure(result, "MLP on the digits")
    right = fig.axes[1]
    assert len(right.texts) == 12
    boxes = _boxes(fig, [right.title, *right.texts])
    assert _none_overlap(boxes)
    image = right.images[0].get_window_extent(fig.canvas.get_renderer())
    assert all(image.x0 <= b.x0 and b.x1 <= image.x1 and b.y1 <= image.y1 for b in boxes[1:])


def test_the_perceptron_legend_hides_no_point():
    """Issue 38: the legend sat in a corner of the square of points."""
    from milestones import perceptron

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(200, 2))
    y = np.where(x[:, 0] + x[:, 1] > 0, 1, -1)
    lines = [(0.1, 0.2, 0.0), (0.5, 0.4, 0.1), (1.0, 1.0, 0.0)]
    fig = perceptron.figure(x, y, lines)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    shown = ax.transData.transform(x)
    inside = (legend.x0 <= shown[:, 0]) & (shown[:, 0] <= legend.x1)
    inside &= (legend.y0 <= shown[:, 1]) & (shown[:, 1] <= legend.y1)
    assert not inside.any() and not legend.overlaps(ax.get_window_extent(renderer))


def test_pareto_numbers_of_nearly_equal_variants_do_not_overprint():
    """Issue 38: two variants of almost the same size and quality printed their numbers on top of
    each other in pareto.png."""
    from milestones import compress

    rows = [{"name": n, "bytes": b, "bits_per_char": q} for n, b, q in (
        ("original", 400_000, 2.20), ("int8 per-channel", 100_000, 2.21),
        ("int8 per-tensor", 100_200, 2.211), ("int4", 50_000, 2.5), ("pruned", 100_100, 2.212),
    )]  # fmt: skip
    fig = compress.pareto_figure(rows)
    ax = fig.axes[0]
    numbers = [t for t in ax.texts if t.get_text().isdigit()]
    assert [t.get_text() for t in numbers] == ["1", "2", "3", "4", "5"]
    assert _none_overlap(_boxes(fig, numbers))
