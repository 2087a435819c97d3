"""Similarity checking on a class of 20 module-13 submissions (tests/tito/similarity_class.py):
every copy flagged, renamed ones included, and no pair of honest students."""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from tito.cli.main import app
from tito.grading import similarity

# beside this file, not in tests/: tests/*.py go into the student edition, and this class
# holds solutions of module 13
_spec = importlib.util.spec_from_file_location(
    "similarity_class", Path(__file__).with_name("similarity_class.py")
)
similarity_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(similarity_class)


def tito(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    course = tmp_path_factory.mktemp("similarity") / "course"
    done = tito("grade", "init", course)
    assert done.exit_code == 0, done.output
    groups = similarity_class.build(course)
    return course, groups, similarity.run(course, similarity_class.MODULE)


def related(groups, a: str, b: str) -> bool:
    return any(a in group and b in group for group in groups)


def test_every_copy_is_flagged_and_no_honest_pair(klass):
    _, groups, result = klass
    names = sorted(result.texts)
    assert len(names) == 21  # twenty students and the reference
    flagged = {(p.a, p.b) for p in result.flagged()}
    pairs = list(itertools.combinations(names, 2))
    copies = [p for p in pairs if related(groups, *p)]
    honest = [p for p in pairs if not related(groups, *p)]
    assert len(copies) == 28 + 6 and len(honest) == 210 - 34  # 8 in the reference group
    missed = [p for p in copies if p not in flagged]
    wrongly = [p for p in honest if p in flagged]
    assert missed == [] and wrongly == []  # true positive rate 1, false positive rate 0
    for pair in [("(reference)", "refrenamed"), ("(reference)", "refdisguised")]:
        assert pair in flagged  # renamed, reordered, comments rewritten: still the reference
    assert ("copy1", "honest1") in flagged  # a classmate's notebook with renamed variables
    assert ("honest4", "honest8") in flagged  # one function of four copied
    assert result.too_short == []


def test_the_release_is_discounted(klass):
    course, _, result = klass
    blank = similarity.Release(similarity_class.MODULE)
    release = nbformat.read(
        course / "submitted" / "honest1" / "13_transformers" / "transformers.ipynb", 4
    )
    for cell in release.cells:  # the starter code around every stub counts for nothing
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in blank.cells:
            cell.source = blank.cells[grade_id]
    assert set(blank.own(release).values()) == {""}
    own = result.texts["honest1"]
    assert "class LayerNorm" not in own and "centered = x - mu" in own
    # without the discount, the starter code alone makes honest students look alike
    everything = {
        name: {"all": "\n".join(parts.values())}
        for name, parts in {
            n: {"x": (course / "submitted" / n / "13_transformers" / "transformers.ipynb")
                .read_text()} for n in ("honest2", "honest3")
        }.items()
    }  # fmt: skip
    pairs, _, _ = similarity.compare(everything, "", similarity.Settings())
    assert pairs[0].score > 0.9


def test_the_command_ranks_pairs_writes_the_report_and_the_csv_value(klass, tmp_path):
    course, _, _ = klass
    hostile = course / "submitted" / "<b onmouseover=alert(1)>x" / "13_transformers"
    hostile.mkdir(parents=True)
    honest = course / "submitted" / "honest2" / "13_transformers" / "transformers.ipynb"
    notebook = nbformat.read(honest, 4)
    for cell in notebook.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "layernorm":
            cell.source += "\n        # </pre><script>alert(1)</script>\n"
    nbformat.write(notebook, hostile / "transformers.ipynb")
    archive = tmp_path / "fall" / "submitted" / "olga" / "13_transformers"
    archive.mkdir(parents=True)
    shutil.copy(
        course / "submitted" / "honest7" / "13_transformers" / "transformers.ipynb", archive
    )
    try:
        done = tito("grade", "similarity", "13", "--course", course, "--archive", tmp_path / "fall")
        assert done.exit_code == 0, done.output
        lines = [line for line in done.output.splitlines() if "│" in line]
        assert "1.00" in lines[0]  # highest first
        assert "archive:olga" in done.output and "the reference solution" in done.output
        page = similarity.report_path(course, similarity_class.MODULE).read_text()
        assert "<mark>" in page and "refrenamed" in page
        assert "<script" not in page and "<b onmouseover" not in page
        assert "&lt;b onmouseover=alert(1)&gt;x" in page  # the name, shown as text
        value = similarity.csv_value(course, "13_transformers", "refcopy")
        assert value.startswith("FLAGGED 1.00 with ")
        assert similarity.csv_value(course, "13_transformers", "honest7").startswith(
            "FLAGGED 1.00 with archive:olga"
        )
        assert similarity.csv_value(course, "13_transformers", "nobody") == ""
        # without last term's copy, honest7 (who shares no code) is not flagged
        assert tito("grade", "similarity", "13", "--course", course).exit_code == 0
        alone = similarity.csv_value(course, "13_transformers", "honest7")
        assert alone and not alone.startswith("FLAGGED")
    finally:
        shutil.rmtree(hostile.parent)


def test_thresholds_are_settings(klass):
    course, _, _ = klass
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.TitoSimilarity.threshold = 0.9\n"
    )
    assert similarity.settings(course).threshold == 0.9
    assert similarity.settings(course, threshold=0.5).threshold == 0.5
    done = tito("grade", "similarity", "13", "--course", course, "--threshold", "2")
    assert done.exit_code == 1 and "threshold must be in (0, 1]" in done.output
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.TitoSimilarity.noise = 'long'\n"
    )
    done = tito("grade", "similarity", "13", "--course", course)
    assert done.exit_code == 1 and "c.TitoSimilarity.noise in nbgrader_config.py is 'long'" in (
        " ".join(done.output.split())
    )


def test_a_notebook_that_is_no_file_is_never_read(tmp_path):
    """A pipe or an oversized file where a notebook belongs is left out, not read: a FIFO would
    block the run, and a device such as /dev/zero grew the instructor's process to 23 GB."""
    copy = tmp_path / "course"
    assert tito("grade", "init", copy).exit_code == 0
    similarity_class.build(copy)
    name = f"{similarity_class.MODULE.slug}.ipynb"
    where = copy / "submitted" / "pipe" / similarity_class.MODULE.name
    where.mkdir(parents=True)
    os.mkfifo(where / name)
    huge = copy / "submitted" / "huge" / similarity_class.MODULE.name
    huge.mkdir(parents=True)
    (huge / name).write_bytes(b" " * (64 * 2**20))
    result = similarity.run(copy, similarity_class.MODULE)
    assert "pipe" not in result.texts and "huge" not in result.texts
    assert len(result.texts) == 21  # everyone else compared as before
