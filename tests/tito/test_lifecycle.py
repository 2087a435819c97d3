"""The student lifecycle through the CLI: open, complete, reset, export --check, errors."""

import json
import re
import subprocess
import sys

import nbformat
import pytest
from typer.testing import CliRunner

from tito.curriculum import notebooks
from tito.curriculum.catalog import find
from tito.curriculum.paths import PACKAGE_ROOT

NB = ("workspace", "01_tensor", "tensor.ipynb")


def test_open_creates_a_stubbed_notebook_and_never_overwrites(project, cli):
    result = cli("module", "open", "1")
    assert result.exit_code == 0, result.output
    path = project.joinpath(*NB)
    text = path.read_text()
    assert 'raise NotImplementedError(\\"module 01 tensor' in text
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("# my own work"))
    nbformat.write(nb, path)
    again = cli("module", "open", "tensor")
    assert again.exit_code == 0 and "already exists" in again.output
    assert "# my own work" in path.read_text()


def test_complete_with_the_solution_passes_and_records(project, cli):
    module = find(1)
    solved = notebooks.read_source(project / module.source)
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    nbformat.write(solved, path)
    result = cli("module", "complete", "1")
    assert result.exit_code == 0, result.output
    record = json.loads((project / ".tito/progress.json").read_text())["completed"]["1"]
    assert record["passed"] > 10 and record["failed"] == 0
    assert "workspace/01_tensor/tensor.ipynb" in (project / "tinytorch/core/tensor.py").read_text()
    status = cli("module", "status")
    assert "complete" in status.output and "1 of" in status.output


def test_complete_tests_the_students_code_not_the_reference(project, cli):
    module = find(1)
    solved = notebooks.read_source(project / module.source)
    for cell in solved.cells:  # break one rule the tests check: a + b becomes a - b
        cell.source = cell.source.replace("        return a + b\n", "        return a - b\n", 1)
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    nbformat.write(solved, path)
    result = cli("module", "complete", "1")
    assert result.exit_code == 1 and "not recorded" in result.output
    # the report names the failing test, its first message and the test line that caught it
    assert "FAILED tests/01_tensor/test_tensor_ops.py::test_broadcast_arithmetic" in result.stdout
    assert "AssertionError: Not equal to tolerance" in result.stdout
    assert re.search(r"at tests/01_tensor/test_tensor_ops.py, line \d+: \S", result.stdout)


def test_reset_keeps_a_backup_and_restores(project, cli):
    cli("module", "open", "1")
    path = project.joinpath(*NB)
    path.write_text(path.read_text().replace("TODO", "MY EDIT", 1))
    (project / "tinytorch/core/tensor.py").write_text("# student code\n")
    result = cli("module", "reset", "1", "--yes")
    assert result.exit_code == 0, result.output
    backups = list((path.parent / "backups").glob("*.ipynb"))
    assert len(backups) == 1 and "MY EDIT" in backups[0].read_text()
    assert "MY EDIT" not in path.read_text()
    assert cli("module", "export", "--all", "--check").exit_code == 0


@pytest.mark.parametrize("answer", ["n\n", ""], ids=["no", "no answer"])
def test_reset_without_a_yes_changes_nothing_and_says_how(project, answer):
    from tito.cli.main import app

    cli_ = CliRunner()
    cli_.invoke(app, ["module", "open", "1"])
    path = project.joinpath(*NB)
    path.write_text(path.read_text().replace("TODO", "MY EDIT", 1))
    result = cli_.invoke(app, ["module", "reset", "1"], input=answer)
    assert result.exit_code == 1, result.output
    assert "not reset; nothing changed" in result.output and "reset 1 --yes" in result.output
    assert "Aborted" not in result.output and "MY EDIT" in path.read_text()
    assert not (path.parent / "backups").exists()


def test_export_check_detects_a_hand_edit(project, cli):
    assert cli("module", "export", "--all", "--check").exit_code == 0
    target = project / "tinytorch/core/tensor.py"
    target.write_text(target.read_text() + "\nHAND_EDIT = 1\n")
    result = cli("module", "export", "1", "--check")
    assert result.exit_code == 1 and "differs" in result.output and "HAND_EDIT" in result.output
    assert cli("module", "export", "1").exit_code == 0
    assert "HAND_EDIT" not in target.read_text()


def test_unknown_module_is_one_clear_line(project, cli):
    result = cli("module", "open", "99")
    assert result.exit_code == 1
    assert "there is no module 99" in result.output and "Traceback" not in result.output
    assert "unknown module" in cli("test", "nosuch").output


def test_malformed_notebook_is_reported_and_kept(project, cli):
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    result = cli("module", "complete", "1")
    assert result.exit_code == 1 and "not a valid notebook" in result.output
    assert path.read_text() == "{ not json"


def test_a_corrupt_notebook_hint_names_the_module_and_a_path_to_type(project, cli, monkeypatch):
    monkeypatch.chdir(project)
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    text = " ".join(cli("module", "complete", "1").output.split())
    assert "error: workspace/01_tensor/tensor.ipynb is not a valid notebook" in text
    assert "`tito module reset 1`" in text and str(project) not in text


def test_a_timeout_is_called_a_timeout(project, cli):
    module = find(1)
    solved = notebooks.read_source(project / module.source)
    for cell in solved.cells:  # an endless loop in the first thing the tests call: a + b
        cell.source = cell.source.replace(
            "        return a + b\n", "        while True:\n            pass\n", 1
        )
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    nbformat.write(solved, path)
    text = " ".join(cli("module", "complete", "1", "--timeout", "1").output.split())
    assert "timed out: the tests ran past the 1 s limit and were stopped" in text
    assert "hint: find what is slow or endless in" in text and "fix the failing" not in text


def test_missing_prerequisite_is_named(project, cli):
    cli("module", "open", "5")
    (project / "tinytorch/core/tensor.py").unlink()
    result = cli("module", "complete", "5")
    assert result.exit_code == 1 and "01 tensor" in result.output


def test_malformed_source_header_is_caught(project, cli):
    source = project / "modules/01_tensor/tensor.py"
    source.write_text(
        source.read_text().replace(
            'nbgrader={"grade": false, "grade_id": "intro"',
            'nbgrader={grade: false, "grade_id": "intro"',
            1,
        )
    )
    result = cli("module", "export", "1")
    assert result.exit_code == 1 and "malformed header" in result.output


def test_debug_flag_shows_the_traceback(project, cli):
    result = cli("--debug", "module", "open", "99")
    assert result.exit_code != 0 and result.exception is not None


def test_tito_test_by_name_and_number_give_real_counts(project, cli):
    by_name = cli("test", "tensor")
    by_number = cli("test", "01")
    assert by_name.exit_code == 0 and by_number.exit_code == 0
    count = by_name.output.split("tests 01_tensor: ")[1].split(" passed")[0]
    assert int(count) > 10 and f"{count} passed, 0 failed" in by_number.output


def test_usage_errors_are_typers_own_with_exit_code_2(project, cli):
    missing = cli("module", "open")
    assert missing.exit_code == 2 and "Missing argument" in missing.output
    unknown = cli("module", "complete", "1", "--bogus")
    assert unknown.exit_code == 2 and "No such option" in unknown.output
    for result in (missing, unknown):
        assert "--debug" not in result.output  # not dressed up as an internal error


def test_tito_starts_without_click_or_the_grading_stack():
    # recent typer ships its own click, so click may be absent; nbgrader and nbformat are
    # imported by the commands that use them, so `tito --help` and `milestone` start fast
    code = (
        "import sys; sys.modules['click'] = None; import tito.cli.main; "
        "assert not {'nbgrader', 'nbformat', 'jupytext', 'numpy'} & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_test_and_complete_run_without_pytorch(project, cli, monkeypatch, tmp_path):
    # a student's install has no torch: tito must not ask for it, and the module's tests (run
    # in a child pytest) must not import it; a `torch` that cannot be imported stands in for
    # the missing package in both processes
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    hidden = tmp_path / "no-torch"
    hidden.mkdir()
    (hidden / "torch.py").write_text("raise ImportError('torch is not installed (test)')\n")
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    child = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
    assert child.returncode == 1 and "torch is not installed (test)" in child.stderr
    module = find("1")
    cli("module", "open", "1")
    solved = notebooks.read_source(project / module.source)
    nbformat.write(solved, project / "workspace" / module.name / f"{module.slug}.ipynb")
    for args in (("test", "tensor"), ("module", "complete", "1")):
        result = cli(*args)
        assert result.exit_code == 0, (args, result.output)
        counted = re.search(r"(\d+) passed, 0 failed", result.output)
        assert counted and int(counted.group(1)) >= 40, (args, result.output)  # every test ran
    progress = json.loads((project / ".tito" / "progress.json").read_text())
    assert progress["completed"]["1"]["failed"] == 0


def test_milestones_and_benchmarks_import_from_any_directory(tmp_path):
    # the `tito` script does not put the working directory on sys.path: both are packages of
    # the install, found without any sys.path or sys.modules editing
    code = (
        "import sys; sys.path = [p for p in sys.path if p not in ('', '.')]; "
        "import benchmarks.run, milestones; "
        "assert callable(benchmarks.run.benchmark); "
        "assert milestones.find('gpt').name == 'gpt'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)


def test_grading_without_nbgrader_says_how_to_install_it(project, cli, monkeypatch):
    import tito

    for name in ["nbgrader", *[m for m in sys.modules if m.startswith("nbgrader.")]]:
        monkeypatch.setitem(sys.modules, name, None)  # as if nbgrader were not installed
    for name in [m for m in sys.modules if m.startswith("tito.grading")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, without nbgrader
    monkeypatch.delattr(tito, "grading", raising=False)
    result = cli("grade", "report", "13")
    assert result.exit_code == 1
    assert "grading needs nbgrader" in result.output and '".[grade]"' in result.output


def test_complete_again_installs_the_students_code_after_a_course_update(project, cli):
    """Issue 38: `git checkout -- tinytorch && git pull` puts the course's package files back;
    `complete --again` installs every completed module from the student's notebook again."""
    module = find(1)
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    nbformat.write(notebooks.read_source(project / module.source), path)
    assert cli("module", "complete", "1").exit_code == 0
    package = project / "tinytorch/core/tensor.py"
    mine = package.read_text()
    reference = (PACKAGE_ROOT / "tinytorch/core/tensor.py").read_text()
    package.write_text(reference)  # what `git checkout -- tinytorch` leaves
    result = cli("module", "complete", "--again")
    assert result.exit_code == 0, result.output
    assert package.read_text() == mine and "1 module(s) complete again" in result.output
    assert "1" in json.loads((project / ".tito/progress.json").read_text())["completed"]

    # an update whose tests the notebook no longer passes: the module is no longer complete
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.source = cell.source.replace("        return a + b\n", "        return a - b\n", 1)
    nbformat.write(nb, path)
    package.write_text(reference)
    failed = cli("module", "complete", "--again")
    assert failed.exit_code == 1
    said = " ".join(failed.stderr.split())
    assert "module 01 is no longer complete" in said and "tito module complete 1" in said
    assert json.loads((project / ".tito/progress.json").read_text())["completed"] == {}
    assert package.read_text() == reference
    assert cli("module", "complete").exit_code == 1  # neither a module nor --again
