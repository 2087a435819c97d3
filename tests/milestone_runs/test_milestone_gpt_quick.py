"""`tito milestone run gpt --quick` as a newcomer runs it: its samples are words, and do not loop.

The thresholds were measured (milestones/RESULTS.md, "Sampling"): with the BPE tokenizer and the
repetition penalty the steered samples of seed 0 have 77-81% of their words in the corpus and no
word trigram more than twice; the character-level quick run they replace had 39% ("The ca
treretiat s the acong") and a greedy sample that repeated "the the the" 38 times.
"""

import collections
import json

import pytest
from typer.testing import CliRunner

from milestones import gpt as gpt_milestone
from milestones.corpus import default_corpus
from tito.cli.main import app
from tito.curriculum import paths

REAL_WORDS = 0.65  # share of a sample's words that occur in the training text
MOST_REPEATS = 3  # times any run of three words may occur in one sample


def words(text: str) -> list[str]:
    return text.split()


def real_share(text: str, vocabulary: set[str]) -> float:
    ws = words(text)
    return sum(w in vocabulary for w in ws) / len(ws)


def most_repeated_trigram(text: str) -> int:
    ws = words(text)
    counts = collections.Counter(zip(ws, ws[1:], ws[2:]))
    return max(counts.values(), default=0)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "gpt-quick"
    result = CliRunner().invoke(app, ["milestone", "run", "gpt", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    vocabulary = set(default_corpus(paths.root() / "data").text.split())
    return summary, " ".join(result.output.split()), vocabulary


def steered(summary):
    return [s for s in summary["samples"] if s["repetition_penalty"] != 1.0 or s["top_p"]]


def test_the_quick_run_is_the_tiny_bpe_model(quick):
    summary = quick[0]
    assert summary["config"]["name"] == "tiny" and summary["corpus"]["tokenizer"] == "bpe"
    assert len(steered(summary)) == 2  # top-p with the penalty, and greedy with the penalty


def test_steered_samples_are_mostly_real_words(quick):
    summary, _, vocabulary = quick
    for sample in steered(summary):
        text = sample["text"][len(summary["prompt"]) :]
        assert len(words(text)) >= 30, sample
        assert real_share(text, vocabulary) >= REAL_WORDS, sample


def test_steered_samples_do_not_loop(quick):
    for sample in steered(quick[0]):
        assert most_repeated_trigram(sample["text"]) <= MOST_REPEATS, sample


def test_the_sampling_choice_is_printed(quick):
    output = quick[1]
    for temperature, _, top_p, penalty in gpt_milestone.SAMPLING:
        label = "greedy" if temperature == 0 else f"temperature {temperature}"
        label += f", top-p {top_p}" if top_p else ""
        label += f", repetition penalty {penalty}" if penalty != 1 else ", no repetition penalty"
        assert label in output


def test_the_measures_catch_what_the_old_quick_run_wrote():
    vocabulary = set("The the string is a of".split())
    assert real_share("The ca treretiat s the acong wsenge se lsthe", vocabulary) < REAL_WORDS
    assert most_repeated_trigram("The" + " the" * 30) > MOST_REPEATS
