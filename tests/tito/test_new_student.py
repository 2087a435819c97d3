"""Surprises a new student meets in a first session (typos, other folders, Ctrl-C, a renamed
notebook or class), each answered in one line that says what to do."""

import os
import subprocess
import sys
import textwrap
import time

import nbformat
import pytest

from tito.curriculum import notebooks
from tito.curriculum.catalog import CourseModule, find


def test_a_misspelt_module_gets_a_suggestion(project, cli):
    result = cli("module", "open", "tensr")
    assert result.exit_code == 1 and "did you mean 'tensor'?" in result.stderr


@pytest.mark.parametrize(
    "key", ["workspace/01_tensor/tensor.ipynb", "modules/01_tensor/", "01_tensor", "Tensor", "001"]
)
def test_a_module_can_be_named_by_the_path_a_shell_completed(key):
    assert find(key).number == 1


def test_shell_completion_offers_module_numbers_and_names():
    from tito.curriculum.catalog import MODULES, complete_key

    assert complete_key("t") == [m.slug for m in MODULES if m.slug.startswith("t")]
    assert "tensor" in complete_key("t") and "transformers" in complete_key("tr")
    teens = [f"{m.number:02d}" for m in MODULES if 10 <= m.number < 20]
    assert complete_key("1") == teens
    assert "13" in complete_key("1") and complete_key("x") == []


def test_a_module_number_outside_the_course_names_the_modules(project, cli):
    result = cli("module", "open", "22")
    assert result.exit_code == 1
    assert "there is no module 22" in result.stderr and "21 llama" in result.stderr


def test_a_misspelt_command_gets_a_suggestion(cli):
    result = cli("modul", "list")
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "Did you mean" in said and "'module'" in said


def test_paths_are_shown_as_usable_from_the_folder_tito_ran_in(project, cli, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    old = os.getcwd()
    try:
        os.chdir(elsewhere)
        away = cli("module", "open", "1").stdout
        os.chdir(project)
        here = cli("module", "open", "3").stdout
    finally:
        os.chdir(old)
    assert f"created {project}/workspace/01_tensor/tensor.ipynb" in away
    assert "created workspace/03_layers/layers.ipynb" in here
    assert "jupyter lab workspace/03_layers/layers.ipynb" in here


def test_tito_outside_a_clone_says_how_to_install(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("TITO_ROOT", str(tmp_path))
    result = cli("module", "open", "1")
    assert result.exit_code == 1 and "has no modules/ folder" in result.stderr
    assert "pip install -e" in result.stderr


def test_a_notebook_saved_under_another_name_is_pointed_out(project, cli):
    cli("module", "open", "1")
    folder = project / "workspace" / "01_tensor"
    (folder / "tensor.ipynb").rename(folder / "tensor-Copy1.ipynb")
    result = cli("module", "complete", "1")
    assert result.exit_code == 1 and "found tensor-Copy1.ipynb beside it" in result.stderr
    assert "rename the notebook you worked in to tensor.ipynb" in result.stderr


def test_a_renamed_class_is_explained_without_temporary_paths(project, cli, monkeypatch):
    nb = notebooks.read_source(project / find(1).source)
    cell = next(c for c in nb.cells if "class Add(Function):" in c.source)
    cell.source = cell.source.replace("class Add(Function):", "class Addition(Function):")
    path = project / "workspace" / "01_tensor" / "tensor.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    result = cli("module", "complete", "1")
    assert result.exit_code == 1
    # the course's own Tensor class names Add when the package is imported
    assert "NameError: name 'Add' is not defined" in result.stdout
    # at the notebook's line that names it, not the package file (nor the staged copy's path)
    assert "at tensor.ipynb, cell " in result.stdout and "__add__, __radd__ = _binary(Add)" in (
        result.stdout
    )
    assert "tinytorch/core/tensor.py" not in result.stdout and "tito-stage" not in result.output
    assert "a cell lost its `#| export` line?" in result.stdout


def test_ctrl_c_during_complete_leaves_everything_and_stops_the_tests(project, cli, monkeypatch):
    from tito.student import lifecycle
    from tito.student.runner import run_tests

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lifecycle, "complete", interrupted)
    cli("module", "open", "1")
    result = cli("module", "complete", "1")
    assert result.exit_code == 130 and "interrupted; tinytorch/ and your progress" in result.stderr

    # the runner itself: an interrupt while tests run kills the test process group at once
    folder = project / "tests" / "98_sleepy"
    folder.mkdir()
    marker = project / "pytest.pid"
    (folder / "test_sleepy.py").write_text(
        textwrap.dedent(
            f"""
            import os, time

            def test_sleeps():
                open({str(marker)!r}, "w").write(str(os.getpid()))
                time.sleep(600)
            """
        )
    )

    def stop_when_running(event):
        if event["kind"] == "start":
            for _ in range(600):  # Ctrl-C once the test is inside its sleep
                if marker.exists() and marker.read_text():
                    raise KeyboardInterrupt
                time.sleep(0.05)

    sleepy = CourseModule(98, "sleepy", "Sleepy", (), (), "tests/98_sleepy")
    with pytest.raises(KeyboardInterrupt):
        run_tests(sleepy, on_event=stop_when_running)
    pid = int(marker.read_text())
    ps = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    assert ps.stdout.strip() in ("", "Z")


def test_status_lists_every_module_in_progress(project, cli):
    cli("module", "open", "3")
    cli("module", "open", "5")
    out = cli("module", "status").stdout
    assert "also in progress: 03 layers, 05 autograd" in out
    assert "next: tito module open 1" in out


def test_main_entry_point_in_a_fresh_shell_prints_help():
    # a student's first command, with no arguments, shows the commands instead of nothing
    result = subprocess.run([sys.executable, "-m", "tito"], capture_output=True, text=True)
    assert "module" in result.stdout and "Usage: tito" in result.stdout
