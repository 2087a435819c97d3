"""Issue 37: modules 16, 17 and 20 written to the letter of their lessons (other spellings than the
reference's, each what the text asks for) complete, and then every olympics event and the compress
milestone run on them, naming whose code ran; a reading the text rules out (module 17's heads
merged to the model width, which a head-pruned GPT does not have) is refused by module 17's own
tests, at the cell, instead of breaking the olympics later.

The student's package is a copy of the project; tito runs in a process of its own with that copy
first on the path, as a student's `tito` would (a CliRunner here would import this checkout's
tinytorch instead). Tiny sizes and --quick throughout.
"""

import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from tito.curriculum import notebooks
from tito.curriculum.catalog import find
from tito.curriculum.paths import PACKAGE_ROOT

# (where the reference's line is, the student's line): each a spelling the lesson's text allows.
# A reference line is found in the module's solution regions at test time, as the one line
# starting with the first words given and holding the rest, so no answer is copied here; the
# student's lines are alternatives, and this file is instructor-only (the student edition leaves
# tests/tito/ out, tito/grading/edition.py).
TO_THE_LETTER = {
    16: [
        (("cols = ",), "cols = (np.array(heads)[:, None] * d + np.arange(d)).reshape(-1)"),
        (("kept = ",), "kept = np.sort(np.argsort(-importance, kind='stable')[:keep])"),
    ],
    17: [
        (
            ("merged = ",),
            "merged = np.swapaxes(out, 1, 2).reshape(batch, steps, heads * q.shape[-1])",
        ),
    ],
    20: [
        (('return f"',), 'return "a measurement is missing or infinite"'),
        (
            ("return float(", "ratios"),
            "return float((ratios[0] * ratios[1] * ratios[2]) ** (1 / 3))",
        ),
    ],
}
# module 17 read as "(B, H, T, D) -> (B, T, E)" with E the model width: what the text rules out
MODEL_WIDTH = (("merged = ",), "merged = np.swapaxes(out, 1, 2).reshape(batch, steps, x.shape[-1])")
# an error planted before module 20's line that cuts the held-out text into rows
PLANT = (("rows = ",), "if len(ids) > 2000:\n    raise ArithmeticError('planted')\n", "before")


def reference_line(text: str, number: int, where: tuple[str, ...]) -> str:
    """The one line of the module's solution regions that starts with where[0] and holds the
    rest of `where`."""
    inside, found = False, []
    for line in text.splitlines():
        marker = line.strip()
        if marker.startswith(("### BEGIN", "### END")):
            inside = marker.startswith("### BEGIN")
        elif inside and marker.startswith(where[0]) and all(w in marker for w in where[1:]):
            found.append(line)
    assert len(found) == 1, f"module {number}: {len(found)} solution lines match {where}"
    return found[0]


def tito(project, *args, timeout=900):
    env = {**os.environ, "TITO_ROOT": str(project), "PYTHONPATH": str(project)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "tito", *map(str, args)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write_notebook(project, number, edits):
    """The module's reference with `edits` applied, where the student's notebook lives."""
    module = find(number)
    text = (PACKAGE_ROOT / module.source).read_text(encoding="utf-8")
    for where, new, *before in edits:
        old = reference_line(text, number, where)
        indent = old[: len(old) - len(old.lstrip())]
        new = "".join(indent + part + "\n" for part in new.splitlines())
        new = new + old + "\n" if before else new
        text = text.replace(old + "\n", new)
    source = project / "variants" / "modules" / module.name / f"{module.slug}.py"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(text, encoding="utf-8")
    target = project / "workspace" / module.name / f"{module.slug}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebooks.read_source(source), target)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("student")
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "runs", "workspace")
    for name in ("modules", "tinytorch", "tests", "data"):
        shutil.copytree(PACKAGE_ROOT / name, root / name, ignore=ignore)
    shutil.copy2(PACKAGE_ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.fixture(scope="module")
def completed(project):
    """Modules 16, 17 and 20 completed from the notebooks written to the letter."""
    for number, edits in TO_THE_LETTER.items():
        write_notebook(project, number, edits)
        done = tito(project, "module", "complete", number)
        assert done.returncode == 0, done.stdout + done.stderr
    return project


def test_module_17_refuses_heads_merged_to_the_model_width(project):
    write_notebook(project, 17, [MODEL_WIDTH])
    done = tito(project, "module", "complete", 17)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1 and "not recorded" in said
    assert "memoization.ipynb, cell" in said  # the failure points at the student's cell
    assert "cannot reshape" in said


def test_every_olympics_event_and_compress_run_on_the_modules_written_to_the_letter(completed):
    project = completed
    progress = json.loads((project / ".tito" / "progress.json").read_text())["completed"]
    assert {"16", "17", "20"} <= set(progress)
    runs = project / "runs"
    done = tito(project, "milestone", "run", "gpt", "--config", "nano", "--steps", 30,
                "--quick", "--out", runs / "gpt-quick")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "caching your module 17" in done.stdout

    done = tito(project, "milestone", "run", "olympics", "--quick")
    said = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    for part in ("pruning, low rank your module 16", "caching your module 17",
                 "rules your module 20", "the GPT reference module 13"):  # fmt: skip
        assert part in said, part
    summary = json.loads((runs / "olympics-quick" / "summary.json").read_text())
    events = {"speed", "size", "all-around"}
    for entry, scores in summary["scores"].items():
        if entry != "quality":
            assert events <= set(scores), entry
    assert "half the heads and neurons" in summary["entries"]  # a head-pruned GPT, cached
    assert set(summary["scores"]["quality"]) == {"plain", "accelerated"}

    done = tito(project, "milestone", "run", "compress", "--quick", "--steps", 6)
    said = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pruning, low rank, distillation your module 16" in said
    assert "caching your module 17" in said
    rows = json.loads((runs / "compress-quick" / "summary.json").read_text())["rows"]
    halved = next(r for r in rows if r["name"] == "heads and MLP neurons halved")
    assert halved["kv_cache"] is True and halved["sample"]


def test_a_failure_in_the_students_module_names_the_module_and_the_cell(completed):
    # module 20's tests pass (their texts are short); the olympics' held-out text is not
    project = completed
    write_notebook(project, 20, [*TO_THE_LETTER[20], PLANT])
    try:
        done = tito(project, "module", "complete", 20)
        assert done.returncode == 0, done.stdout + done.stderr
        done = tito(project, "milestone", "run", "olympics", "--quick")
        said = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 1, said
        assert "failed in your module 20 capstone, capstone.ipynb, cell" in said
        assert "raise ArithmeticError('planted')" in said and "tito module complete 20" in said
    finally:
        write_notebook(project, 20, TO_THE_LETTER[20])
        done = tito(project, "module", "complete", 20)
        assert done.returncode == 0, done.stdout + done.stderr
