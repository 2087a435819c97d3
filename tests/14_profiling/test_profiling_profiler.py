"""The profiler as a listener: events, layers, kept bytes, latency, rows, and the given runs
that drive it (profile_step, profile_generation)."""

import numpy as np
import pytest

from tinytorch.core.autograd import topological_order
from tinytorch.core.hooks import listen, listeners
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import AdamW
from tinytorch.core.transformer import GPT
from tinytorch.profile.events import OUTSIDE, OpEvent
from tinytorch.profile.flops import gpt_step_flops
from tinytorch.profile.profiler import Profiler, by_operation, latency, matmul_share
from tinytorch.profile.runs import profile_generation, profile_step


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
    return OpEvent(op, phase, seconds, matmul, other, 100, 0, "")


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
