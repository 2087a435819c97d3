"""The profiler as a listener: events, layers, kept bytes, latency, rows, runs, the report."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from tinytorch.core.autograd import topological_order
from tinytorch.core.hooks import listen, listeners
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.transformer import GPT
from tinytorch.profile.flops import gpt_step_flops
from tinytorch.profile.profiler import (
    OUTSIDE,
    Event,
    Profiler,
    by_operation,
    latency,
    matmul_share,
    profile_generation,
    profile_step,
)
from tinytorch.profile.report import machine_rates, operation_table, plot_roofline, plot_time


def small_gpt(seed=0, **overrides):
    np.random.seed(seed)
    config = dict(vocab_size=21, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=10)
    return GPT(**{**config, **overrides})


TOKENS = np.random.default_rng(5).integers(0, 21, size=(2, 10))


def test_listening_changes_no_number():
    plain, heard = small_gpt(), small_gpt()
    cross_entropy(plain(TOKENS), TOKENS).backward()
    profiler = Profiler(heard)
    with listen(profiler):
        loss = cross_entropy(heard(TOKENS), TOKENS)
        loss.backward()
    assert listeners() == ()
    np.testing.assert_array_equal(loss.data, cross_entropy(plain(TOKENS), TOKENS).data)
    for (name, a), (_, b) in zip(plain.named_parameters(), heard.named_parameters()):
        np.testing.assert_array_equal(a.grad, b.grad, err_msg=name)


def test_every_graph_operation_is_heard_forward_and_backward_in_its_layer():
    model = small_gpt()
    profiler = Profiler(model)
    with listen(profiler):
        loss = cross_entropy(model(TOKENS), TOKENS)
        nodes = [type(t._ctx).__name__ for t in topological_order(loss) if t._ctx is not None]
        loss.backward()  # frees the graph
    forward = [e for e in profiler.events if e.phase == "forward"]
    backward = [e for e in profiler.events if e.phase == "backward"]
    assert len(forward) == len(nodes) == len(backward)
    assert sorted(e.op for e in forward) == sorted(nodes)
    layers = {(e.op, e.layer) for e in forward}
    assert ("MatMul", "blocks.1.attention") in layers  # q kᵀ, inside the attention layer
    assert any(e.layer == "blocks.0.mlp" for e in forward)  # GELU is not a Module: its MLP is
    assert any(e.layer == "blocks.0.mlp.linear2" and e.matmul_flops for e in forward)
    assert any(e.layer == "" for e in forward)  # the loss, outside the model
    assert profiler.stack == [] and profiler.seen == {}
    by_backward = {(e.op, e.layer) for e in backward}
    assert by_backward == {(e.op, e.layer) for e in forward}


def test_kept_bytes_are_the_graph_and_peak_at_the_end_of_the_forward():
    model = small_gpt(tie_weights=True)
    profiler = Profiler(model)
    with listen(profiler):
        loss = cross_entropy(model(TOKENS), TOKENS)
        graph = sum(t.data.nbytes for t in topological_order(loss) if t._ctx is not None)
        assert profiler.live_bytes == graph
        loss.backward()
    assert profiler.peak_bytes == graph and profiler.live_bytes == 0
    layers = profiler.kept_by_layer()
    assert sum(layers.values()) == graph
    c, t, b = 16, 10, 2
    hidden = b * t * 4 * c * 4  # one float32 (B, T, 4C) array: one output of linear1
    assert layers["blocks.0.mlp.linear1"] % hidden == 0 and layers["blocks.0.mlp.linear1"] > 0
    assert layers["blocks.0.ln1"] >= b * t * c * 4


def test_no_gradient_keeps_nothing_and_an_unseen_backward_is_ignored():
    model = small_gpt()
    profiler = Profiler(model)
    with listen(profiler):
        model.generate(TOKENS[:1, :3], 4, temperature=0, use_cache=False)
    assert profiler.peak_bytes == 0 and all(e.phase == "forward" for e in profiler.events)
    loss = cross_entropy(model(TOKENS), TOKENS)  # forward before the profiler listens
    late = Profiler(model)
    with listen(late):
        loss.backward()
    assert late.events == [] and late.live_bytes == 0


def test_latency_warms_up_then_times_each_repeat():
    ticks = iter(np.arange(0.0, 100.0, 0.5))
    calls = []
    result = latency(lambda: calls.append(1), warmup=2, repeats=5, clock=lambda: next(ticks))
    assert len(calls) == 7
    np.testing.assert_allclose(result.times, 0.5)
    durations = iter([1, 2, 3, 4, 100])  # one slow outlier leaves the median alone
    clock_values = iter(np.cumsum([0, *[v for d in durations for v in (d, 0)]]))
    slow = latency(lambda: None, warmup=0, repeats=5, clock=lambda: next(clock_values))
    np.testing.assert_allclose(slow.times, [1, 2, 3, 4, 100])
    assert (slow.median, slow.q1, slow.q3, slow.spread) == (3, 2, 4, 2)
    assert "ms" in str(slow)


@pytest.mark.parametrize("warmup, repeats", [(-1, 3), (0, 0), (1.5, 2), (True, 2)])
def test_latency_rejects_counts_that_are_not_whole(warmup, repeats):
    with pytest.raises(ValueError, match="must be a whole number"):
        latency(lambda: None, warmup=warmup, repeats=repeats)


def event(op, phase, seconds, matmul=0, other=0):
    return Event(op, phase, seconds, matmul, other, 100, 0, "")


def test_rows_group_sort_and_share_the_wall_time():
    events = [
        event("MatMul", "forward", 0.2, 1000),
        event("Add", "forward", 0.1, 0, 10),
        event("MatMul", "forward", 0.3, 1000),
        event("MatMul", "backward", 0.1, 4000),
        event("Kernel", "forward", 0.05, 0, None),
    ]
    rows = by_operation(events, wall_seconds=1.0)
    assert [(r.op, r.phase, r.calls) for r in rows] == [
        ("MatMul", "forward", 2),
        ("Add", "forward", 1),
        ("MatMul", "backward", 1),
        ("Kernel", "forward", 1),
        (OUTSIDE, "", 0),
    ]  # the rest of the wall time, last
    assert rows[0].flops == 2000 and rows[0].gflops == pytest.approx(2000 / 0.5 / 1e9)
    assert rows[4].seconds == pytest.approx(0.25) and rows[3].other_flops is None
    assert sum(r.share for r in rows) == pytest.approx(1)
    assert matmul_share(rows) == pytest.approx(0.6)
    assert [r.kind for r in rows] == ["matmul", "other", "matmul", "other", "outside"]
    assert rows[0].intensity == pytest.approx(2000 / 200)
    no_wall = by_operation(events)
    assert OUTSIDE not in {r.op for r in no_wall} and sum(
        r.share for r in no_wall
    ) == pytest.approx(1)


def test_a_profiled_training_step_counts_the_formula_and_traces_its_peak():
    model = small_gpt()
    before = [p.data.copy() for p in model.parameters()]
    step = profile_step(model, TOKENS, TOKENS, AdamW(model.parameters(), lr=1e-2), repeats=2)
    assert step.repeats == 2 and step.wall_seconds > 0
    assert (
        step.profiler.totals()["matmul_flops"] == 2 * gpt_step_flops(model.config, 2, 10)["total"]
    )
    assert any(not np.array_equal(a, p.data) for a, p in zip(before, model.parameters()))
    assert step.traced_peak_bytes >= step.profiler.peak_bytes > 0
    rows = step.rows
    assert OUTSIDE not in [r.op for r in rows[:-1]]
    assert sum(r.share for r in rows) == pytest.approx(1)


def test_generation_without_a_cache_recomputes_every_window():
    model = small_gpt()
    prompt, new = TOKENS[:1, :3], 9  # slides past max_seq_len=10
    run = profile_generation(model, prompt, new, repeats=1, use_cache=False)
    lengths = [min(3 + i, 10) for i in range(new)]
    expected = sum(gpt_step_flops(model.config, 1, t)["total"] // 3 for t in lengths)
    assert run.profiler.totals()["matmul_flops"] == expected


def test_the_report_shows_every_row_and_plots_them():
    events = [
        event("MatMul", "forward", 0.2, 10**9),
        event("LayerNormFunction", "backward", 0.1, 0, 10**6),
        event("Kernel", "forward", 0.05, 0, None),
    ]
    rows = by_operation(events, wall_seconds=0.5)
    rates = {"matmul_gflops": 10.0, "copy_gbytes": 5.0}
    text = operation_table(rows, rates)
    for name in ("MatMul fwd", "LayerNormFunction bwd", "Kernel fwd", OUTSIDE):
        assert name in text
    assert "5.00" in text and "50.0%" in text  # 1 GFLOP in 0.2 s: 5 GFLOP/s, half the roof
    assert text.splitlines()[-1] == "time in matrix multiplies: 40.0% of the wall time"
    bars = plot_time(rows)
    assert isinstance(bars, Figure) and len(bars.axes[0].patches) == len(rows)
    roof = plot_roofline(rows, rates)
    assert len(roof.axes[0].lines) == 1 + 2  # the roof, and the two operations with counts


def test_machine_rates_measure_both_roofs():
    rates = machine_rates(size=64, repeats=2)
    assert set(rates) == {"matmul_gflops", "copy_gbytes"}
    assert all(np.isfinite(v) and v > 0 for v in rates.values())
