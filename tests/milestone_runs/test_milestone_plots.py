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
