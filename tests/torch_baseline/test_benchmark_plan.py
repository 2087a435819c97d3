"""The benchmark's plan: which thread settings each side runs, and a data-parallel child run."""

import json
import subprocess
import sys
from dataclasses import asdict

import pytest

from benchmarks.common import ROOT, Row, parse_setting
from benchmarks.report import rows
from benchmarks.run import settings

TRAIN = Row("train_small", "train", "small", batch=4, seq_len=16, steps=1, warmup=1)
GEN = Row("gen_small", "generate", "small", new_tokens=4, steps=1, warmup=0)


def test_training_rows_get_the_data_parallel_setting_for_both_libraries():
    full = ("1t", "2t")
    assert settings(TRAIN, full) == ("1t", "2t", "2w")  # measured for each library
    assert settings(GEN, full) == full
    assert settings(TRAIN, ("1t",)) == ("1t",)  # --quick: one thread only
    own = Row("train_small_own", "train", "small", settings=("own",))
    assert settings(own, full) == ("own",)  # the user's loop: default threads only


def test_the_own_loop_setting_runs_the_accelerated_gpt_split_over_the_cores():
    from benchmarks.common import TinyTrainer, batches, tiny_model
    from tinytorch.accel.parallel import SplitBatch
    from tinytorch.accel.processes import SplitOverProcesses, can_fork
    from tinytorch.core.tensor import Tensor
    from tinytorch.models.transformer import PRESETS

    assert parse_setting("own") == (0, 0)  # no thread setting, no DataParallel
    model = tiny_model(PRESETS["small"])
    trainer = TinyTrainer(model, workers=0)
    assert trainer.parallel is None
    x, y = batches(PRESETS["small"].vocab_size, 4, 8, 1)[0]
    split = SplitOverProcesses if can_fork() else SplitBatch  # what the trainer's step runs
    assert isinstance(model(Tensor(x))._ctx, split)
    assert trainer.step(x, y) > 0


def test_the_split_library_is_the_plain_lessons_with_only_the_batch_split():
    """tinytorch-split (own-loop rows): no layer swapped, the optimizer the lesson's, and the
    training forward split over the cores as `accelerate(model, parts=())` does."""
    from benchmarks.child import _build
    from benchmarks.common import SPLIT, TinyTrainer, batches
    from benchmarks.run import FULL
    from tinytorch.accel.accelerate import accelerated
    from tinytorch.accel.parallel import SplitBatch
    from tinytorch.accel.processes import SplitOverProcesses, can_fork
    from tinytorch.core.tensor import Tensor
    from tinytorch.models.transformer import PRESETS

    model = _build(SPLIT, PRESETS["small"])
    trainer = TinyTrainer(model, workers=0, accelerated=False)
    assert accelerated(model) == set() and accelerated(trainer.opt) == set()
    x, y = batches(PRESETS["small"].vocab_size, 4, 8, 1)[0]
    split = SplitOverProcesses if can_fork() else SplitBatch
    assert isinstance(model(Tensor(x))._ctx, split)
    assert trainer.step(x, y) > 0
    own = [row for row, _ in FULL if row.settings == ("own",)]
    assert own and all(SPLIT in row.libraries for row in own)
    done = child(SPLIT, "own", TRAIN)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["step_ms"] > 0


def test_settings_parse_and_refuse():
    assert parse_setting("1t") == (1, 1) and parse_setting("2t") == (2, 1)
    assert parse_setting("2w") == (1, 2)
    with pytest.raises(ValueError, match="like 1t, 2t or 2w"):
        parse_setting("2x")


def child(library, setting, row):
    cmd = [sys.executable, "-m", "benchmarks.child", library, setting, json.dumps(asdict(row))]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_data_parallel_setting_splits_as_the_gpt_milestone_does():
    from benchmarks.common import TinyTrainer, batches, tiny_model
    from tinytorch.accel.processes import can_fork, split_of
    from tinytorch.models.transformer import PRESETS

    model = tiny_model(PRESETS["small"], accelerated=False)
    trainer = TinyTrainer(model, workers=2, accelerated=False)
    assert trainer.parallel.processes == can_fork()  # milestones/training.py: processes=None
    x, y = batches(PRESETS["small"].vocab_size, 4, 8, 1)[0]
    assert trainer.step(x, y) > 0
    assert (split_of(model) is not None) == can_fork()  # the worker the child's memory counts


@pytest.mark.parametrize("library", ["tinytorch", "tinytorch-plain", "torch"])
def test_a_data_parallel_child_trains_and_reports(library):
    done = child(library, "2w", TRAIN)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["step_ms"] > 0 and result["peak_mib"] > 0
    refused = child(library, "2w", GEN)
    assert refused.returncode != 0 and "for training rows only" in refused.stderr


def test_the_torch_split_computes_the_whole_batch_gradient():
    """PyTorch's 2w baseline does the same work as its 1t one: the batch split over three threads
    gives the whole batch's loss and gradients (left in .grad after the step), step after step."""
    import numpy as np
    import torch

    from benchmarks.common import TorchTrainer, batches, config
    from benchmarks.torch_gpt import TorchGPT

    cfg = config(TRAIN)
    runs = {}
    for workers in (1, 3):
        torch.manual_seed(0)
        trainer = TorchTrainer(TorchGPT(cfg), workers=workers)
        for x, y in batches(cfg.vocab_size, 5, 16, 2):
            loss = trainer.step(x, y)
        grads = [p.grad.numpy().copy() for p in trainer.model.parameters()]
        runs[workers] = loss, grads
    assert runs[3][0] == pytest.approx(runs[1][0], rel=1e-5)
    for a, b in zip(runs[1][1], runs[3][1]):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-6)


def test_the_report_names_each_cell_setting_and_compares_cpu_time_only_at_one_thread():
    def cell(setting, median):
        return {"setting": setting, "median": median, "min": median, "max": median,
                "cpu": {"median": median}}  # fmt: skip

    def results(ours, ref):
        best = {
            "tinytorch": {"step_ms": ours, "peak_mib": cell(ours["setting"], 90.0)},
            "torch": {"step_ms": ref, "peak_mib": cell(ref["setting"], 150.0)},
        }
        libs = {lib: {"best": best[lib]} for lib in best}
        return {"rows": {"train_small": {"libraries": libs, "rounds": 5}}}

    row, memory = rows(results(cell("2w", 50.0), cell("2t", 50.0)))
    assert row["tinytorch"].endswith("@2w") and row["torch"].endswith("@2t")
    assert row["ratio"] == "1.00" and row["cpu_ratio"] == "-" and row["status"] == "goal met"
    assert memory["tinytorch"].endswith("@2w") and memory["ratio"] == "0.60"
    row, _ = rows(results(cell("1t", 130.0), cell("1t", 100.0)))
    assert row["cpu_ratio"] == "1.30" and row["status"] == "MUST MISSED"


CONV_ROW = Row("conv_lenet", "conv", "conv", batch=4, conv=(2, 3, 9, 7, 3, 2, 1), steps=1, warmup=0)


@pytest.mark.parametrize("library", ["tinytorch", "torch"])
def test_a_conv_child_times_one_layer_forward_and_backward(library):
    done = child(library, "1t", CONV_ROW)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["step_ms"] > 0 and result["step_cpu_ms"] > 0 and result["peak_mib"] >= 0


def test_conv_rows_need_no_model_preset_and_are_a_config_of_their_own():
    from benchmarks.common import config
    from benchmarks.run import FULL

    conv = [row for row, _ in FULL if row.kind == "conv"]
    assert {row.key for row in conv} == {"conv_lenet", "conv_large"}
    assert all(row.preset == "conv" and config(row) is None for row in conv)
    assert settings(conv[0], ("1t", "2t")) == ("1t", "2t")  # no data-parallel setting


def test_the_reference_is_measured_accelerated_and_the_plain_lessons_are_not():
    from benchmarks.common import TinyTrainer, config, tiny_model
    from tinytorch.accel.accelerate import PARTS, accelerated

    cfg = config(TRAIN)
    fast, lesson = tiny_model(cfg), tiny_model(cfg, accelerated=False)
    assert accelerated(fast) == set(PARTS) - {"adamw"} and accelerated(lesson) == set()
    assert accelerated(TinyTrainer(fast).opt) == {"adamw"}
    assert accelerated(TinyTrainer(lesson, accelerated=False).opt) == set()


def test_the_report_shows_the_plain_rows_against_pytorch():
    def best(median):
        cell = {"setting": "1t", "median": median, "min": median, "max": median}
        return {"tok_s": cell, "peak_mib": cell}

    libs = {"tinytorch": {"best": best(300.0)}, "tinytorch-plain": {"best": best(100.0)},
            "torch": {"best": best(200.0)}}  # fmt: skip
    results = {
        "rows": {
            "gen_small": {"libraries": libs, "rounds": 5},
            "gen_small_uncached": {"libraries": {"tinytorch-plain": libs["torch"]}, "rounds": 3},
        }
    }
    found = {r["metric"]: r["ratio"] for r in rows(results)}
    assert found["cached greedy tokens/s, small, B1"] == "1.50"
    assert found["cached greedy tokens/s, small, plain 01-13"] == "0.50"
    uncached = [m for m in found if m.startswith("uncached")]
    assert len(uncached) == 1 and found[uncached[0]] == "1.00"  # against PyTorch's cached row


GEMM_ROW = Row("gemm_small", "gemm", "small", batch=2, seq_len=8, steps=1, warmup=0)


def test_the_floor_row_times_the_products_the_gpt_makes_at_one_core():
    from benchmarks.child import _products
    from benchmarks.run import FULL
    from tinytorch.models.transformer import GPT, PRESETS

    cfg = PRESETS["small"]
    model = GPT.from_config(cfg)
    weights = [p.shape for p in model.parameters() if len(p.shape) == 2]
    # every Linear's weight once (module 18 packs q, k and v side by side); the tied head
    # multiplies by the token table transposed; the position table takes no product
    linear = sorted(s for s in weights if s != (cfg.vocab_size, cfg.embed_dim)
                    and s != (cfg.max_seq_len, cfg.embed_dim))  # fmt: skip
    shapes = _products(cfg, rows=32)
    assert all(n == 32 for n, _, _ in shapes)
    assert shapes[-1][1:] == (cfg.embed_dim, cfg.vocab_size)
    unpacked = []
    for _, k, m in shapes[:-1]:
        unpacked += [(k, k)] * 3 if m == 3 * k else [(k, m)]
    assert sorted(unpacked) == linear
    floors = {row.key: row for row, _ in FULL if row.kind == "gemm"}
    own = {row.key: row for row, _ in FULL if row.settings == ("own",)}
    for size in ("small", "medium"):  # one core's half of the own loop's batch, one thread
        floor, loop = floors[f"gemm_{size}"], own[f"train_{size}_own"]
        assert floor.batch * 2 == loop.batch and floor.seq_len == loop.seq_len
        assert settings(floor, ("1t", "2t")) == ("1t",)


@pytest.mark.parametrize("library", ["tinytorch", "torch"])
def test_a_floor_child_times_the_products_alone(library):
    done = child(library, "1t", GEMM_ROW)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["step_ms"] > 0 and result["step_cpu_ms"] > 0
