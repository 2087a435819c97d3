"""Whose code a GPT run uses: the reference's fast paths only where no completed module of the
student's would be replaced, and a header that says which part came from where."""

import json

from rich.console import Console

import milestones
from milestones import provenance
from tinytorch.accel.accelerate import PARTS

PROSE = "the cat sat on the mat, the dog ran to the park. " * 40


def test_the_header_names_each_part_and_who_wrote_it():
    fresh = provenance.header(frozenset(), provenance.parts(frozenset()))
    assert "attention reference module 12, accelerated by reference module 18" in fresh
    assert "batch split given" in fresh and "caching reference module 17" in fresh
    own = frozenset(range(1, 14))
    line = provenance.header(own, provenance.parts(own))
    assert "attention your module 12;" in line and "layer norm your module 13;" in line
    assert "accelerated" not in line
    some = frozenset({12})
    line = provenance.header(some, provenance.parts(some))
    assert "attention your module 12;" in line
    assert "layer norm reference module 13, accelerated by reference module 18" in line
    everything = frozenset({*range(1, 14), 18})
    line = provenance.header(everything, provenance.parts(everything))
    assert "attention your module 12, accelerated by your module 18" in line
    assert "batch split given" in line and "split your" not in line  # DataParallel is given
    assert "caching your module 17" in provenance.header(frozenset({17}), ())


def run(tmp_path, completed):
    data = tmp_path / "prose.txt"
    data.write_text(PROSE, encoding="utf-8")
    console = Console(record=True, width=400)
    options = milestones.RunOptions(tmp_path / "gpt", config="nano", steps=3, data=data,
                                    completed=completed, console=console)  # fmt: skip
    summary = milestones.find("gpt").run(options)
    saved = json.loads((tmp_path / "gpt" / "summary.json").read_text())
    assert saved["training"]["accelerated"] == summary["training"]["accelerated"]
    return summary, console.export_text()


def test_a_fresh_clone_trains_accelerated_and_says_so(tmp_path):
    summary, said = run(tmp_path, frozenset())
    assert summary["training"]["accelerated"] == sorted(PARTS)
    assert "attention reference module 12, accelerated by reference module 18" in said


def test_a_student_who_wrote_01_to_13_runs_their_own_code(tmp_path):
    summary, said = run(tmp_path, frozenset(range(1, 14)))
    assert summary["training"]["accelerated"] == []
    assert "attention your module 12;" in said and "accelerated by" not in said
