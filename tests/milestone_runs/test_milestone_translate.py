"""`tito milestone run translate`: the number-words corpus, its masks, training and the outputs."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from milestones import numbers, translate
from tito.cli.main import app

runner = CliRunner()


def said(result):
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (40, "forty"),
        (42, "forty two"),
        (100, "one hundred"),
        (312, "three hundred and twelve"),
        (1005, "one thousand and five"),
        (2300, "two thousand three hundred"),
        (7777, "seven thousand seven hundred and seventy seven"),
        (9019, "nine thousand and nineteen"),
    ],
)
def test_number_words(n, text):
    assert " ".join(numbers.words(n)) == text


def test_every_number_has_its_own_words_within_the_lengths():
    sources = {tuple(numbers.words(n)) for n in range(numbers.LARGEST + 1)}
    assert len(sources) == numbers.LARGEST + 1  # no two numbers share their words
    assert max(len(s) for s in sources) == numbers.MAX_SOURCE_LEN
    with pytest.raises(ValueError, match="covers 0 to 9999"):
        numbers.words(10_000)


def test_split_holds_numbers_out_of_training():
    train, test = numbers.split(seed=3, test_size=1000)
    assert len(test) == 1000 and len(train) == numbers.LARGEST + 1 - 1000
    assert not set(train) & set(test)
    again, other = numbers.split(3, 1000)[1], numbers.split(4, 1000)[1]
    assert np.array_equal(test, again) and not np.array_equal(test, other)


def test_batch_pads_sources_and_targets_and_the_mask_hides_only_padding():
    batch = numbers.batch([7, 312, 7777])
    assert batch.source_lengths.tolist() == [1, 4, 7]
    assert batch.source.shape == (3, 7) and (batch.source[0, 1:] == numbers.PAD).all()
    assert [numbers.VOCAB[i] for i in batch.source[1, :4]] == "three hundred and twelve".split()
    first = [numbers.START, numbers.TOKEN_ID["7"], numbers.END, numbers.PAD, numbers.PAD]
    assert batch.target[0].tolist() == [*first, numbers.PAD]
    assert np.array_equal(batch.decoder_input, batch.target[:, :-1])
    assert np.array_equal(batch.labels, batch.target[:, 1:])  # next token, PAD ignored by the loss
    assert [numbers.decode(row[1:]) for row in batch.target] == ["7", "312", "7777"]
    mask = translate.source_mask(batch)
    assert mask.shape == (3, 1, 1, 7)
    assert np.array_equal(np.isinf(mask[:, 0, 0]), batch.source == numbers.PAD)


def test_first_step_below_counts_steps_of_the_running_mean():
    loss = [2.0] * 20 + [0.01] * 20
    assert translate.first_step_below(loss, 0.1) == 30  # steps 21..30 are the first low window
    assert translate.first_step_below([0.05], 0.1) == 1  # shorter than the window
    assert translate.first_step_below(loss[:20], 0.1) is None


@pytest.fixture(scope="module")
def trained():
    """The default recipe, smaller: enough steps to learn the task well past chance."""
    config = replace(translate.TRAINING["nano"], steps=250, eval_every=250)
    train_nums, test_nums = numbers.split(0, 200)
    model = translate.build("nano", 0, norm_first=True)
    with translate.progress(Console(quiet=True)) as bar:
        translate.train(model, train_nums, test_nums, config, 0, "test", bar)
    return model, test_nums


def test_training_learns_to_write_held_out_numbers(trained):
    model, test_nums = trained
    assert translate.exact_match(model, test_nums) > 0.5  # chance is about 1 in 10,000


def test_attention_maps_read_no_padding_and_cached_decoding_agrees(trained):
    model, test_nums = trained
    examples = [7, 312, 7777]
    maps = translate.attention_maps(model, examples)
    for weights in maps["cross"]:  # (B, H, T, S): every written token, over the source words
        np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
        for row, n in enumerate(examples):
            assert (weights[row, :, :, len(numbers.words(n)) :] == 0).all()
    wrote, check = translate.decoding_check(model, test_nums)
    assert check["cached_equals_uncached"] and len(wrote) == len(test_nums)


def test_tiny_run_writes_summary_and_plots(tmp_path):
    out = tmp_path / "translate"
    result = runner.invoke(
        app, ["milestone", "run", "translate", "--quick", "--steps", "12", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["preset"] == "nano" and summary["training"]["steps"] == 12
    assert "code: reference modules 01 02" in said(result)  # whose code ran
    assert summary["corpus"]["held_out"] == translate.TRAINING["nano"].test_size
    assert 0.0 <= summary["held_out_exact_match"] <= 1.0
    assert summary["decoding"]["cached_equals_uncached"] is True
    variants = summary["norm_comparison"]
    assert [v["norm_first"] for v in variants] == [True, False]
    assert all([step for step, _ in v["accuracy_curve"]] == [12] for v in variants)
    for name in ("alignment.png", "self_attention.png", "norm_comparison.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG" and name in summary["files"]
    assert "held-out exact match" in said(result) and "post-norm" in said(result)
    for v in variants:  # the progress bar ends on the table's numbers
        bar = re.search(rf"{v['variant']} .* 12/12 loss ([\d.]+) +all ([\d,]+) held-out ([\d.]+)%",
                        result.output)  # fmt: skip
        assert bar, result.output
        assert float(bar[1]) == pytest.approx(v["mean_loss_last_10pct"], abs=5e-4)
        assert int(bar[2].replace(",", "")) == summary["corpus"]["held_out"]
        assert float(bar[3]) == pytest.approx(100 * v["held_out_exact_match"], abs=0.05)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "0"], "--steps must be at least 1, got 0"),
        (["--config", "huge"], "unknown --config 'huge'"),
        (["--seed", "-1"], "--seed must be a whole number >= 0"),
        (["--seed", str(2**32)], "--seed must be below 2**32"),
        (["--data", "words.txt"], "--data does not apply to translate"),
        (["--resume"], "--resume does not apply to translate"),
        (["--tokenizer", "bpe"], "--tokenizer does not apply to translate"),
    ],
)
def test_bad_options_are_one_line(tmp_path, args, message):
    result = runner.invoke(app, ["milestone", "run", "translate", "--out", str(tmp_path), *args])
    assert result.exit_code == 1
    assert said(result).startswith(f"error: {message}")
    assert "Traceback" not in result.output and len(result.output.splitlines()) == 2
    assert not (tmp_path / "summary.json").exists()
