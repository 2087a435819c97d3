"""The Torch Olympics as a student enters them: `tito olympics run` and `leaderboard` on a small
trained run, measured by the tool (claims in the manifest count for nothing), scored by
module 20's rules on held-out text the run never saw."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from milestones import corpus, olympics
from milestones.errors import MilestoneError
from milestones.runs import load_run
from tinytorch.core.autograd import no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.olympics.events import EVENTS, Measured
from tinytorch.olympics.rules import score, violation
from tito.cli.main import app

runner = CliRunner()
PROSE = (
    "The cat sat on the mat and the dog ran to the park. A small model reads this text and "
    "learns which letter follows which, so the words come back again and again.\n"
) * 20


def tito(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A nano GPT trained on a small text: a run folder as `tito milestone run gpt` writes it."""
    root = tmp_path_factory.mktemp("olympics")
    data = root / "prose.txt"
    data.write_text(PROSE, encoding="utf-8")
    out = root / "run"
    done = tito("milestone", "run", "gpt", "--config", "nano", "--steps", 60, "--data", data,
                "--out", out)  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("TITO_ROOT", str(tmp_path))
    for part in ("tinytorch", "modules"):
        (tmp_path / part).symlink_to(olympics.Path(olympics.__file__).parents[1] / part)
    return tmp_path


def test_the_held_out_text_is_not_in_the_default_corpus():
    assert not set(olympics.HELDOUT_SOURCES) & set(corpus.STDLIB_SOURCES)
    training = corpus.build_default_text()
    text = olympics.heldout_text(training)
    assert len(text) == olympics.HELDOUT_CHARS
    for paragraph in text.split("\n\n")[:-1]:  # the last one may be cut short
        assert paragraph not in training


def test_a_run_reads_back_with_its_own_tokenizer(trained):
    run = load_run(trained)
    assert run.vocab.kind == "char" and run.vocab.decode(run.vocab.encode("the cat")) == "the cat"
    assert run.config.vocab_size == run.vocab.vocab_size == len(set(PROSE))
    with pytest.raises(MilestoneError, match="no trained run"):
        load_run(trained.parent / "nowhere")


def test_quality_is_measured_on_held_out_text_not_on_what_the_run_memorised(trained):
    run = load_run(trained)
    seen = olympics.heldout_bits(run, run.model, PROSE)
    unseen = olympics.heldout_bits(run, run.model, olympics.heldout_text(PROSE))
    assert seen < unseen  # it learned its text; held out, it scores as it really is
    record = olympics.run_event("size", trained, None, repeats=1)
    assert record["baseline"]["bits_per_char"] == pytest.approx(unseen)


def test_the_held_out_score_is_the_summed_surprise_in_bits_per_character(trained):
    """Module 04's cross-entropy gives the score: checked against a float64 log-softmax here."""
    run = load_run(trained)
    text = olympics.heldout_text(PROSE)
    known = set(run.vocab.tokenizer.vocab)
    ids = np.asarray(run.vocab.encode("".join(ch for ch in text if ch in known)))
    window = run.config.max_seq_len
    count = (len(ids) - 1) // window
    x = ids[: count * window].reshape(count, window)
    y = ids[1 : count * window + 1].reshape(count, window)
    with no_grad():
        logits = run.model(Tensor(x)).data.astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    nats = -np.take_along_axis(log_p, y[..., None], axis=-1).sum()
    chars = len(run.vocab.decode(y.ravel()))
    expected = nats / np.log(2) / chars
    assert olympics.heldout_bits(run, run.model, text) == pytest.approx(expected, rel=1e-5)
    with pytest.raises(MilestoneError, match="too short for one window"):
        olympics.heldout_bits(run, run.model, text[:window])


def test_a_manifest_that_claims_numbers_is_measured_as_it_is(trained):
    (trained / "olympics.json").write_text(
        json.dumps(
            {
                "name": "liar",
                "transforms": ["accelerate"],
                "tokens_per_second": 1e12,
                "bytes": 1,
                "bits_per_char": 0.01,
                "score": 1000,
            }
        )  # fmt: skip
    )
    record = olympics.run_event("all-around", trained, None, repeats=2)
    assert olympics.valid(record)
    assert record["name"] == "liar" and record["transforms"] == ["accelerate"]
    m, b = Measured(**record["measured"]), Measured(**record["baseline"])
    assert m.tokens_per_second < 1e7 and m.bytes == b.bytes > 1000
    assert m.bits_per_char == pytest.approx(b.bits_per_char, rel=1e-5)  # acceleration is exact
    rules = EVENTS["all-around"]
    assert record["score"] == score(rules, m, b) and record["violation"] == violation(rules, m, b)


def test_transformations_are_checked_before_anything_is_measured(trained, monkeypatch):
    (trained / "olympics.json").write_text(json.dumps({"transforms": ["turbo"]}))
    with pytest.raises(MilestoneError, match="no transformation 'turbo'"):
        olympics.run_event("speed", trained, None)

    def missing(model, argument):
        raise ImportError("tinytorch.compress")

    monkeypatch.setitem(olympics.TRANSFORMS, "quantize", (15, str, missing))
    with pytest.raises(MilestoneError, match="needs module 15"):
        olympics.apply(load_run(trained).model, ["quantize:int8-per-channel"])
    (trained / "olympics.json").write_text("{not json")
    with pytest.raises(MilestoneError, match="not valid JSON"):
        olympics.read_manifest(trained)
    (trained / "olympics.json").unlink()
    assert olympics.read_manifest(trained) == {"name": trained.name, "transforms": []}


def test_weight_bytes_counts_every_array_once_and_int8_as_one_byte():
    from tinytorch.core.layers import Linear

    layer = Linear(8, 4)
    assert olympics.weight_bytes(layer) == (8 * 4 + 4) * 4
    layer.weight_int8 = np.zeros((4, 8), dtype=np.int8)
    layer.alias = layer.weight_int8[:2]  # a view is not more bytes
    assert olympics.weight_bytes(layer) == (8 * 4 + 4) * 4 + 32


def test_the_leaderboard_keeps_valid_records_best_first():
    base = {"tokens_per_second": 100.0, "bytes": 10, "bits_per_char": 2.0, "train_cpu_seconds": 0.0}

    def record(name, value):
        return {"event": "speed", "name": name, "run": "r", "checkpoint_sha256": "x",
                "transforms": [], "measured": base, "baseline": base, "violation": None,
                "score": value, "environment": {}, "when": "now"}  # fmt: skip

    forged = {**record("eve", 99.0), "bonus": True}
    nan = record("nan", float("nan"))
    board = olympics.leaderboard(
        [record("ada", 1.5), record("bob", 2.0), record("ada", 1.8), forged, nan]
    )
    assert [(r["name"], r["score"]) for r in board["speed"]] == [("bob", 2.0), ("ada", 1.8)]


def test_the_commands_record_and_show_a_result(trained, project):
    (trained / "olympics.json").write_text(
        json.dumps({"name": "ada", "transforms": ["accelerate"]})
    )
    done = tito("olympics", "run", "speed", "--run", trained, "--repeats", 2)
    assert done.exit_code == 0, done.output
    assert "ada in speed:" in done.output and "recorded in" in done.output
    records = json.loads((project / "runs" / "olympics" / "results.json").read_text())
    assert len(records) == 1 and olympics.valid(records[0])
    shown = tito("olympics", "leaderboard")
    assert shown.exit_code == 0 and "ada" in shown.output and "accelerate" in shown.output


def test_command_errors_are_one_line(trained, project):
    wrong = tito("olympics", "run", "sprint", "--run", trained)
    assert wrong.exit_code == 1 and "no event 'sprint'" in wrong.output
    nowhere = tito("olympics", "run", "speed", "--run", project / "none")
    assert nowhere.exit_code == 1 and "no trained run" in nowhere.output
    assert "Traceback" not in wrong.output + nowhere.output
    empty = tito("olympics", "leaderboard")
    assert empty.exit_code == 0 and "no results yet" in empty.output


def test_training_choices_are_checked():
    from milestones import budget

    assert budget.settings({}) == budget.DEFAULTS
    assert budget.settings({"train": {"lr": 0.01}})["lr"] == 0.01
    for bad, said in (
        ({"epochs": 3}, "must be an object with some of"),
        ({"config": "huge"}, "unknown config 'huge'"),
        ({"lr": 5}, "'train.lr' must be a number from"),
        ({"batch_size": True}, "'train.batch_size' must be a number"),
    ):
        with pytest.raises(MilestoneError, match=said):
            budget.settings({"train": bad})


def test_cpu_time_is_read_from_the_kernel():
    import os

    from milestones import budget

    first = budget.cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))
    assert budget.cpu_seconds(os.getpid()) > first > 0


def test_a_save_cut_short_by_the_budget_leaves_no_temporary_file(tmp_path):
    from milestones import budget

    out = tmp_path / "entry"
    out.mkdir()
    # what the kill leaves when it lands inside write_atomic: the temporary twin of a checkpoint
    (out / ".step-5.npz.k3j2x9.tmp").write_bytes(b"half a checkpoint")
    job = budget.settings({"train": {"config": "nano", "batch_size": 8}})
    used = budget.train(job, [], out, 4.0, None)
    assert 0 < used <= 4.0
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz"]


def test_the_quality_event_trains_both_models_within_the_budget(trained):
    (trained / "olympics.json").write_text(
        json.dumps(
            {
                "name": "ada",
                "train": {"config": "nano", "lr": 0.01, "batch_size": 8},
                "train_cpu_seconds": 0.0,
            }
        )  # fmt: skip
    )
    record = olympics.run_event("quality", trained, None, repeats=1, budget=6.0)
    assert olympics.valid(record)
    m, b = Measured(**record["measured"]), Measured(**record["baseline"])
    assert 0 < m.train_cpu_seconds <= 6.0 and 0 < b.train_cpu_seconds <= 6.0
    work = trained / olympics.QUALITY_FOLDER
    assert sorted(p.name for p in (work / "entry").iterdir()) == ["checkpoint.npz"]
    assert load_run(work / "entry").config.embed_dim == 32  # nano, as the manifest chose
    assert load_run(work / "baseline").config.embed_dim == 64  # tiny, the default
    assert record["score"] == score(EVENTS["quality"], m, b, 6.0) > 0


@pytest.mark.parametrize(
    "spec",
    [
        "quantize:int8-per-channel",
        "quantize:int4-per-tensor",
        "prune-structure:0.5",
        "lowrank:0.25",
    ],  # fmt: skip
)
def test_compression_transforms_make_the_measured_model_smaller(trained, spec):
    run = load_run(trained)
    before = olympics.weight_bytes(run.model)
    text = olympics.heldout_text(PROSE)
    bits = olympics.heldout_bits(run, run.model, text)
    smaller = olympics.apply(load_run(trained).model, [spec])
    assert olympics.weight_bytes(smaller) < before
    assert abs(olympics.heldout_bits(run, smaller, text) - bits) < 0.5 * bits  # still the model


@pytest.mark.parametrize("transforms", [[], ["quantize:int8-per-channel"]])
def test_the_size_measured_is_the_models_and_not_what_its_last_call_kept(trained, transforms):
    """Scoring the held-out text leaves each attention layer's (B, H, T, T) weights behind;
    the measured size is that of the model before it ran: its parameters, or its int8 codes."""
    fresh = olympics.apply(load_run(trained).model, transforms)
    size = olympics.weight_bytes(fresh)
    if not transforms:
        assert size == sum(p.data.nbytes for p in fresh.parameters())
    measured = olympics.measure(trained, transforms, None, repeats=1)
    assert measured.bytes == size


def test_a_transformation_argument_is_checked_when_the_manifest_is_read(trained):
    for spec, said in (
        ("quantize:int3", "must be one of int8-per-channel"),
        ("prune-structure:2", "must be a fraction between 0 and 1"),
        ("lowrank:half", "must be a fraction"),
    ):
        (trained / "olympics.json").write_text(json.dumps({"transforms": [spec]}))
        with pytest.raises(MilestoneError, match=said):
            olympics.read_manifest(trained)
    (trained / "olympics.json").unlink()
