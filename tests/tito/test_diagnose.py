"""tito diagnose: a planted bug is found at its operation, with its cause and the student's cell;
a correct notebook reports nothing; nothing of the reference or the checks is shown."""

from pathlib import Path

import nbformat
import pytest

from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import MODULES as CATALOG
from tito.curriculum.catalog import find
from tito.student.diagnose import diagnose, reference_trace

_references = {}


def reference(number: int):
    if number not in _references:
        _references[number] = reference_trace(find(number))
    return _references[number]


def solved(number: int):
    return notebooks.read_source(paths.source(find(number)))


def planted(number: int, old: str, new: str, folder: Path) -> Path:
    """The reference notebook of a module with one line of a solution cell changed."""
    notebook = solved(number)
    hits = 0
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and old in cell.source:
            cell.source = cell.source.replace(old, new)
            hits += 1
    assert hits == 1, f"{old!r} is in {hits} solution cells of module {number}"
    path = folder / f"{find(number).slug}.ipynb"
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("number", [m.number for m in CATALOG])
def test_the_reference_diagnoses_clean_on_every_module(number, tmp_path):
    # two fresh processes, the reference in both: every random draw (a layer's default weights
    # come from numpy's global generator) must be the same in each (all 21 take about 35 s)
    path = tmp_path / "solved.ipynb"
    nbformat.write(solved(number), path)
    result = diagnose(find(number), path)
    assert result.checks and not result.notes
    assert not result.findings, [(f.check, f.what, f.summary) for f in result.findings]


BUGS = [
    # (module, the line, the slip, the operation named, words of the hint)
    (1, "        return a - b", "        return b - a", "Sub.forward", "a sign slip"),
    (
        5,
        "grads[key] = g if key not in grads else grads[key] + g",
        "grads[key] = g",
        "the gradient reaching Add.backward",
        "each node's gradients are added up (+=, not =)",
    ),
    (
        12,
        "scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5",
        "scores = q @ k.transpose(-2, -1)",
        "Add.forward",
        "a missing (or doubled) 1/sqrt(d) scale, with d = 3",
    ),
    (
        13,
        "normalized = (x - mean) / (variance + self.eps) ** 0.5",
        "normalized = (x - mean) / variance ** 0.5",
        "(in layer LayerNorm)",
        "a missing or different epsilon",
    ),
    (
        13,
        "mean = x.mean(axis=-1, keepdims=True)",
        "mean = x.mean(axis=0, keepdims=True)",
        "Mean.forward (in layer LayerNorm)",
        "a mean or sum over the wrong axis (axis=-1 belongs)",
    ),
    (
        4,
        "loss = -np.sum(log_probs[keep]) / max(self.count, 1)",
        "loss = -np.sum(log_probs[keep])",
        "CrossEntropyFunction.forward",
        "a sum where a mean belongs",
    ),
]


LOSS_BUG = next(bug for bug in BUGS if bug[0] == 4)


@pytest.mark.parametrize("number, old, new, operation, words", BUGS)
def test_a_planted_bug_is_named(number, old, new, operation, words, tmp_path):
    path = planted(number, old, new, tmp_path)
    result = diagnose(find(number), path, reference=reference(number))
    assert result.findings
    first = result.findings[0]
    assert operation in first.what and words in first.hint
    assert first.place.startswith(f"{path.name}, cell ")
    # the line cited is the slip itself, except where the slip removed an operation: then it is
    # the next operation, whose input already differs (the hint says how)
    # the engine's slip shows where the engine hands the wrong gradient on
    cited = {
        12: "scores = scores + Tensor(mask)",
        5: "for parent, g in zip(fn.parents, fn.backward(total)):",
    }.get(number, new.strip())
    assert cited in first.place


def test_the_command_names_the_cell_and_shows_no_reference_or_check_code(tmp_path, cli):
    number, old = 13, "mean = x.mean(axis=-1, keepdims=True)"
    new = "mean = x.mean(axis=-1, keepdims=True) * 0.5"
    path = planted(number, old, new, tmp_path)
    result = cli("diagnose", "13", "--notebook", str(path))
    assert result.exit_code == 1, result.output
    assert "differs" in result.output and "(in layer LayerNorm)" in result.output
    assert f"{path.name}, cell " in result.output
    student = {line.strip() for c in nbformat.read(path, 4).cells for line in c.source.splitlines()}
    hidden = set()
    for cell in solved(number).cells:
        meta = cell.metadata.get("nbgrader", {})
        for line in cell.source.splitlines():
            if meta.get("grade") or line.strip() not in student:
                hidden.add(line.strip())
    shown = [line for line in hidden if len(line) > 12 and line in result.output]
    assert not shown


def test_without_a_notebook_it_says_how_to_make_one(project, cli):
    result = cli("diagnose", "13")
    assert result.exit_code == 1
    assert "no notebook at" in result.stderr and "tito module open" in result.stderr


def test_a_notebook_in_the_workspace_is_the_default(project, cli):
    target = project / "workspace" / "04_losses" / "losses.ipynb"
    target.parent.mkdir(parents=True)
    planted(4, LOSS_BUG[1], LOSS_BUG[2], target.parent)
    result = cli("diagnose", "losses")
    assert result.exit_code == 1 and "losses.ipynb, cell " in result.output


def test_a_submission_is_diagnosed_in_the_grading_sandbox_the_same_way(tmp_path):
    from tito.student.diagnose import explain, submission_trace

    number, old, new = LOSS_BUG[:3]
    notebook = nbformat.read(planted(number, old, new, tmp_path), 4)
    student, cells = submission_trace(find(number), notebook)
    result = explain(find(number), student, cells, reference(number))
    local = diagnose(
        find(number), tmp_path / f"{find(number).slug}.ipynb", reference=reference(number)
    )
    assert [(f.check, f.what, f.hint) for f in result.findings] == [
        (f.check, f.what, f.hint) for f in local.findings
    ]
    assert result.findings[0].place.startswith("the submission, cell ")


def test_it_needs_no_grading_tools(tmp_path):
    # a student installs the package and the test extra, not nbgrader: diagnose must not need it
    import subprocess
    import sys

    path = planted(*LOSS_BUG[:3], tmp_path)
    program = (
        "import sys; sys.modules['nbgrader'] = None; from tito.cli.main import run; "
        f"sys.argv = ['tito', 'diagnose', '4', '--notebook', {str(path)!r}]; run()"
    )
    run = subprocess.run(
        [sys.executable, "-c", program], cwd=paths.PACKAGE_ROOT, capture_output=True, text=True
    )
    assert run.returncode == 1, run.stderr
    assert "CrossEntropyFunction.forward" in run.stdout and "nbgrader" not in run.stderr
