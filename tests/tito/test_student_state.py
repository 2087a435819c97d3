"""The student's state stays consistent: status and reset say what is true, every change to
the package and progress is all or nothing, completed code is never silently replaced, and
files follow the umask."""

import json
import os
import stat

import nbformat
import pytest

from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import find

NB = ("workspace", "01_tensor", "tensor.ipynb")


def test_status_after_open_says_in_progress_and_next_is_complete(project, cli):
    cli("module", "open", "1")
    result = cli("module", "status")
    assert "in progress" in result.stdout
    assert "tito module complete 1" in result.stdout and "tito module open 1" not in result.stdout


def test_reset_of_a_never_opened_module_changes_nothing(project, cli):
    result = cli("module", "reset", "5")
    assert result.exit_code == 0
    assert result.stdout.strip() == "module 05_autograd was never opened; nothing to reset."
    assert not (project / "workspace" / "05_autograd").exists()
    assert "not started" in cli("module", "list").stdout


@pytest.mark.parametrize("text", ['{"cells": 5}', "[]", '{"cells": [1, 2]}'])
def test_json_that_is_not_a_notebook_is_one_line(project, cli, text):
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    result = cli("module", "complete", "1")
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: ") and str(path) in first and "not a notebook" in first
    assert path.read_text() == text


def test_files_follow_the_umask(project, cli):
    old = os.umask(0o027)
    try:
        cli("module", "open", "1")
        cli("module", "export", "1")
        cli("module", "reset", "1", "--yes")
        from tito.curriculum import paths
        from tito.student import progress

        paths.write_atomic(progress.file(), progress.with_record(3, 1, 0, {}))
    finally:
        os.umask(old)
    for rel in (NB, ("tinytorch", "core", "tensor.py"), (".tito", "progress.json")):
        mode = stat.S_IMODE(project.joinpath(*rel).stat().st_mode)
        assert mode == 0o640, (rel, oct(mode))


def test_write_all_puts_every_file_back_when_one_rename_fails(tmp_path, monkeypatch):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("old a")
    real, calls = os.replace, []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(5, "Input/output error", str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError):
        paths.write_all({a: "new a", b: "new b"})
    assert a.read_text() == "old a" and not b.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no temporary left behind


def test_a_read_only_package_is_named_before_any_test_runs(project, cli, monkeypatch):
    cli("module", "open", "1")
    core = project / "tinytorch" / "core"
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if p == core else real(p, mode))
    result = cli("module", "complete", "1")
    assert result.exit_code == 1
    assert f"{core} is read-only; nothing was changed" in result.stderr
    assert "tito-stage" not in result.output and "passed" not in result.output


def test_completed_code_is_installed_with_progress_or_not_at_all_and_export_keeps_it(
    project, cli, monkeypatch
):
    solved = notebooks.read_source(project / find(1).source)
    path = project.joinpath(*NB)
    path.parent.mkdir(parents=True)
    nbformat.write(solved, path)
    package = project / "tinytorch/core/tensor.py"
    reference = package.read_text()
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k broadcast_arithmetic")

    # the progress file cannot be written: the package must not change either
    real = paths._stage

    def refuse_progress(target, text):
        if target.name == "progress.json":
            raise PermissionError(13, "Permission denied", str(target))
        return real(target, text)

    monkeypatch.setattr(paths, "_stage", refuse_progress)
    failed = cli("module", "complete", "1")
    assert failed.exit_code == 1 and str(project / ".tito/progress.json") in failed.stderr
    assert package.read_text() == reference and not (project / ".tito/progress.json").exists()
    monkeypatch.setattr(paths, "_stage", real)

    # a hand edit of the package file is kept as a backup when the notebook's code goes in
    package.write_text(reference + "\n# my quick fix\n")
    done = cli("module", "complete", "1")
    assert done.exit_code == 0 and "held edits tito did not write; saved them to" in done.stdout
    (backup,) = (project / "workspace/01_tensor/backups").glob("tensor-*.py")
    assert backup.read_text().endswith("# my quick fix\n")
    mine = package.read_text()
    assert "workspace/01_tensor/tensor.ipynb" in mine

    # the student's completed code is what --check expects, and export keeps it
    check = cli("module", "export", "--all", "--check")
    assert check.exit_code == 0 and "1 with your completed code" in check.stdout
    every = cli("module", "export", "--all")
    assert every.exit_code == 0 and "kept your completed code for 01 tensor" in every.stdout
    one = cli("module", "export", "1")
    assert one.exit_code == 1 and "--force" in one.stderr
    assert package.read_text() == mine

    # a hand edit after completion is drift; --force puts the reference back and says so
    package.write_text(mine + "\nHAND_EDIT = 1\n")
    drift = cli("module", "export", "1", "--check")
    assert drift.exit_code == 1 and "changed since you completed" in drift.stdout
    forced = cli("module", "export", "1", "--force")
    assert forced.exit_code == 0 and package.read_text() == reference
    assert "tinytorch/core/tensor.py held edits tito did not write" in forced.stdout
    saved = sorted((project / "workspace/01_tensor/backups").glob("tensor-*.py"))
    assert len(saved) == 2 and saved[-1].read_text() == mine + "\nHAND_EDIT = 1\n"
    assert (
        "01 tensor: the reference code replaced yours, so it is no longer complete; "
        "`tito module complete 1` installs your notebook's code again" in forced.stdout
    )
    assert json.loads((project / ".tito/progress.json").read_text())["completed"] == {}
    assert "in progress" in cli("module", "status").stdout


def test_a_completion_recorded_before_hashes_is_still_the_students_code(project, cli):
    package = project / "tinytorch/core/tensor.py"
    text = package.read_text()
    package.write_text(
        text.replace("from modules/01_tensor/tensor.py;", "from workspace/01_tensor/tensor.ipynb;")
    )
    assert cli("module", "export", "1", "--check").exit_code == 1  # not complete: reference
    record = {"module": 1, "passed": 30, "failed": 0, "completed_at": "2026-01-01T00:00:00"}
    progress = project / ".tito/progress.json"
    progress.parent.mkdir()
    progress.write_text(json.dumps({"version": 1, "completed": {"1": record}}))
    assert cli("module", "export", "1", "--check").exit_code == 0


def test_a_refused_write_names_the_file_not_its_temporary_sibling(tmp_path, monkeypatch):
    import tempfile

    def refuse(dir, prefix, suffix):
        raise PermissionError(13, "Permission denied", f"{dir}/{prefix}x{suffix}")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    target = tmp_path / "progress.json"
    with pytest.raises(PermissionError) as err:
        paths.write_all({target: "{}"})
    assert err.value.filename == str(target)
