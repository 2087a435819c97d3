"""`tito module complete` holds the student's code to what is graded: the notebook's own check
cells run as tests beside the module's, and a report points into the notebook (an error on
import, a helper the package or the grader does not get); `tito test` says when the notebook
has changed since the code it tests was completed."""

import re
import shutil
import subprocess
import sys

import nbformat

from tito.curriculum import notebooks
from tito.curriculum.catalog import find
from tito.curriculum.paths import PACKAGE_ROOT

ALIASED = """                if buf is None:
                    state["momentum_buffer"] = buf = g
                else:
                    buf *= self.momentum
                    buf += g
                g = buf"""


def solved(root, number: int, *test_files: str) -> nbformat.NotebookNode:
    """The reference notebook of module `number` where the student's goes, and the module's
    tests (only `test_files`, if given) in the project."""
    module = find(number)
    folder = root / module.tests
    folder.mkdir(parents=True, exist_ok=True)
    for path in (PACKAGE_ROOT / module.tests).iterdir():
        if path.is_file() and (not test_files or path.name in test_files):
            shutil.copy2(path, folder / path.name)
    return notebooks.read_source(root / module.source)


def write(root, number: int, nb) -> None:
    module = find(number)
    path = root / "workspace" / module.name / f"{module.slug}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def cell_of(nb, text: str) -> tuple[int, nbformat.NotebookNode]:
    return next((n, c) for n, c in enumerate(nb.cells, start=1) if text in c.source)


def test_a_graded_check_that_fails_blocks_complete_and_names_what_it_grades(project, cli):
    # module 06's error tests pass on an SGD whose momentum buffer is the gradient array itself;
    # the notebook's check test-sgd, which the instructor grades, does not
    nb = solved(project, 6, "test_optimizers_errors.py")
    number, cell = cell_of(nb, "class SGD(")
    cell.source = re.sub(r"( +)buf = g\.copy\(\).*\n.*\n", ALIASED + "\n", cell.source, count=1)
    assert ALIASED in cell.source
    write(project, 6, nb)
    package = (project / "tinytorch/core/optimizers.py").read_text()

    result = cli("module", "complete", "6")
    assert result.exit_code == 1 and "not recorded" in result.output
    out = result.stdout
    assert "FAILED optimizers.ipynb::test-sgd" in out and "1 failed" in result.stderr
    assert "graded check test-sgd, which grades SGD.step (cell 'sgd')" in out
    check, _ = cell_of(nb, "def test_sgd_momentum_by_hand")
    at = re.search(rf"at optimizers\.ipynb, cell {check}, line (\d+): (.*)", out)
    assert at, out
    assert nb.cells[check - 1].source.splitlines()[int(at[1]) - 1].strip() == at[2]
    assert (project / "tinytorch/core/optimizers.py").read_text() == package  # not installed


def test_the_reference_passes_its_graded_checks_as_tests(project, cli):
    write(project, 6, solved(project, 6, "test_optimizers_errors.py"))
    result = cli("module", "complete", "6")
    assert result.exit_code == 0, result.output
    assert re.search(r"optimizers\.ipynb +3 passed", result.stdout)


def test_an_error_on_import_points_at_the_notebook_cell(project, cli):
    # a debugging line left at the end of an export cell runs when the package is imported
    nb = solved(project, 7, "test_training_clip_schedule.py")
    number, cell = cell_of(nb, "def clip_grad_norm(")
    cell.source += '\n\n\nprint("clip check:", clip_grad_norm(params_demo, 1.0))'
    write(project, 7, nb)
    result = cli("module", "complete", "7")
    assert result.exit_code == 1
    last = len(cell.source.splitlines())
    assert "NameError: name 'params_demo' is not defined" in result.stdout
    assert (
        f'at training.ipynb, cell {number}, line {last}: print("clip check:", '
        "clip_grad_norm(params_demo, 1.0))" in result.stdout
    )
    assert "tinytorch/core/training.py" not in result.stdout


def _with_helper(root, exported: bool) -> tuple[int, int]:
    """Module 08's notebook with TensorDataset.gather calling a helper the student wrote in a
    cell of their own, just above; returns (the helper's cell, the answer cell)."""
    nb = solved(root, 8, "test_dataloader_loader.py")
    number, cell = cell_of(nb, "    def gather(")
    cell.source = cell.source.replace(
        "        return tuple(a[indices] for a in self.arrays)",
        "        return _rows(self.arrays, indices)",
    )
    header = "#| export\n" if exported else ""
    helper = f"{header}def _rows(arrays, idx):\n    return tuple(a[idx] for a in arrays)"
    nb.cells.insert(number - 1, nbformat.v4.new_code_cell(helper))
    write(root, 8, nb)
    return number, number + 1


def test_a_helper_in_a_cell_without_export_is_named_with_the_fix(project, cli):
    helper, answer = _with_helper(project, exported=False)
    result = cli("module", "complete", "8")
    assert result.exit_code == 1
    assert "NameError: name '_rows' is not defined" in result.stdout
    assert (
        f"`_rows` is defined in cell {helper} of your notebook, which has no `#| export` line, "
        f"so the package does not get it: move it into cell {answer}, the answer cell that uses "
        "it" in result.stdout
    )


def test_a_helper_the_grader_does_not_run_is_named_with_the_fix(project, cli):
    # exported, the tests pass; the graded check runs the answer cells only
    helper, answer = _with_helper(project, exported=True)
    result = cli("module", "complete", "8")
    assert result.exit_code == 1
    assert "FAILED dataloader.ipynb::test-epoch" in result.stdout
    assert "1 failed" in result.stderr
    assert (
        f"`_rows` is defined in cell {helper} of your notebook, which the grader does not run"
        in result.stdout
    )
    assert f"move it into cell {answer}, the answer cell that uses it" in result.stdout


def test_tito_test_says_when_the_notebook_changed_since_complete(project, cli, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k test_tensor_pytorch_names")
    nb = solved(project, 1)
    write(project, 1, nb)
    assert cli("module", "complete", "1").exit_code == 0
    assert "changed since you completed" not in cli("test", "1").output
    _, cell = cell_of(nb, "#| export")
    cell.source += "\n\nEDITED = 1"
    write(project, 1, nb)
    result = cli("test", "1")
    assert result.exit_code == 0  # the package still holds the completed code
    assert (
        "workspace/01_tensor/tensor.ipynb changed since you completed module 1: these tests run "
        "the code that `complete` installed, not your newer edits; `tito module complete 1` "
        "tests and installs them" in " ".join(result.stdout.split())
    )


def test_optimizer_tests_name_the_optimizer_they_run():
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/06_optimizers", "tests/07_training"],
        cwd=PACKAGE_ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    ids = [line for line in listing.splitlines() if "::" in line]
    assert ids and not [i for i in ids if "<lambda>" in i]
