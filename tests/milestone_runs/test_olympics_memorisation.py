"""The olympics' memorisation test (milestones/memorisation.py): an entry trained on the held-out
text, which ships with Python, is found by how much it loses when the text's sentences are
shuffled, and scores 0 with the reason; an honest entry is never flagged. Both directions go
through the real scoring path (run_event: load the run, measure, judge)."""

from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from milestones import olympics, training
from milestones.memorisation import (
    GAP_BOUND,
    memorised,
    sentences,
    shuffled_sentences,
)
from milestones.runs import load_run
from tinytorch.olympics.events import Measured
from tito.cli.main import app

PASSAGE_CHARS = 1_500  # what the cheat learns: a small model learns it in seconds


def tito(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """A nano GPT trained by the milestone on the default corpus."""
    out = tmp_path_factory.mktemp("memorisation") / "honest"
    done = tito("milestone", "run", "gpt", "--config", "nano", "--steps", 40, "--seed", 0,
                "--out", out)  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture(scope="module")
def passage(honest):
    """The default held-out text's first PASSAGE_CHARS characters: what the cheat learns."""
    return olympics.heldout_text(load_run(honest).corpus.text)[:PASSAGE_CHARS]


@pytest.fixture(scope="module")
def cheat(honest, passage, tmp_path_factory):
    """A one-layer GPT with a 32-character context trained on the passage until it knows it,
    saved as a run that claims the default corpus, as a cheat's would. PyTorch trains it
    (8 seconds, where tinytorch's own loop would take minutes); the weights are then tinytorch's."""
    import torch
    from torch_reference import TorchGPT

    from tinytorch.models.transformer import GPT, PRESETS
    from tinytorch.models.weights import load_torch_state_dict

    run = load_run(honest)
    config = replace(PRESETS["tiny"], vocab_size=run.config.vocab_size, num_layers=1,
                     max_seq_len=32)  # fmt: skip
    ids = np.asarray(run.vocab.encode(passage))
    window = config.max_seq_len
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ref = TorchGPT.from_config(config)
    optimizer = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.0)
    rng = np.random.default_rng(0)
    for _ in range(300):
        starts = rng.integers(0, len(ids) - window - 1, size=32)
        x = torch.as_tensor(np.stack([ids[s : s + window] for s in starts]))
        y = torch.as_tensor(np.stack([ids[s + 1 : s + window + 1] for s in starts]))
        loss = torch.nn.functional.cross_entropy(ref(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.set_num_threads(threads)
    model = GPT.from_config(config)
    load_torch_state_dict(model, {k: v.detach().numpy() for k, v in ref.state_dict().items()})
    sizes = {k: getattr(config, k) for k in ("embed_dim", "num_layers", "num_heads", "max_seq_len")}
    meta = {**run.meta, "config": {**run.meta["config"], **sizes, "name": "tiny"}}
    out = tmp_path_factory.mktemp("memorisation") / "cheat"
    out.mkdir()
    training.save(out / "checkpoint.npz", model, None, meta["steps"], meta, training.History())
    return out


def test_shuffled_sentences_are_the_same_text_in_another_order(passage):
    parts = sentences(passage)
    assert "".join(parts) == passage and len(parts) > 15
    one, two = (shuffled_sentences(passage, np.random.default_rng(s)) for s in (1, 2))
    assert one != two and one != passage  # another order at every draw
    assert sorted(one.replace("\n", "")) == sorted(passage.replace("\n", ""))  # nothing lost
    assert one.startswith(tuple(parts)) and two.startswith(tuple(parts))  # whole sentences


def test_an_honest_entry_is_not_flagged(honest):
    record = olympics.run_event("size", honest, None, repeats=1)  # the default held-out text
    assert olympics.valid(record) and record["violation"] is None and record["score"] > 0
    m = record["measured"]
    assert abs(m["shuffled_bits_per_char"] - m["bits_per_char"]) < GAP_BOUND / 2


@pytest.mark.needs_torch
def test_an_entry_trained_on_the_held_out_text_is_flagged_and_scores_0(
    honest, cheat, passage, monkeypatch
):
    # one fixed order: the cheat's gap depends on the order drawn (0.054 to 0.23 bits/char over
    # 200 orders, median 0.16, 0.175 for this one; the honest run's at most 0.003)
    monkeypatch.setattr(olympics, "shuffle_order", lambda: np.random.default_rng(0))
    plain = load_run(honest)
    honest_bits = olympics.heldout_bits(plain, plain.model, passage)
    # one baseline given, as a class's run gives it: the honest run's score on the same text
    baseline = Measured(tokens_per_second=1.0, bytes=1, bits_per_char=honest_bits)
    record = olympics.run_event("size", cheat, None, 1, baseline=baseline, heldout=passage)
    m = record["measured"]
    assert m["bits_per_char"] < honest_bits - 1  # what it gained by learning the text
    assert m["shuffled_bits_per_char"] - m["bits_per_char"] > 2 * GAP_BOUND
    assert record["violation"].startswith("trained on the held-out text: with its sentences")
    assert "\n" not in record["violation"] and record["score"] == 0.0
    assert olympics.valid(record)  # recorded, at the bottom of the board


def test_the_reason_names_both_scores_and_the_bound():
    assert memorised(3.0, 3.0 + GAP_BOUND * 0.99) is None
    assert memorised(3.0, None) is None  # a record from before the test
    said = memorised(1.5, 1.7)
    assert "1.700 bits/char against 1.500" in said and f"bound {GAP_BOUND}" in said
