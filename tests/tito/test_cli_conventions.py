"""tito behaves like the command lines students already know: stderr for errors, -h, shell
completion, python -m, --debug anywhere, usage that parses."""

import os
import subprocess
import sys

import pytest

from tito.curriculum.catalog import MODULES


def test_errors_and_hints_go_to_stderr(project, cli):
    result = cli("module", "open", "99")
    assert result.exit_code == 1
    assert "error: there is no module 99" in result.stderr and "hint:" in result.stderr
    assert "error" not in result.stdout


@pytest.mark.parametrize("args", [("-h",), ("module", "-h"), ("module", "complete", "-h")])
def test_dash_h_is_help_everywhere(cli, args):
    result = cli(*args)
    assert result.exit_code == 0 and "Usage:" in result.output


def test_shell_completion_is_offered(cli, monkeypatch):
    assert "--install-completion" in cli("--help").output
    # Typer finds the shell from the process tree unless told (its own tests' switch): under a
    # user whose login shell is sh, `--show-completion` would otherwise answer "Shell sh not
    # supported" whatever is asked
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = cli("--show-completion", "bash")
    assert result.exit_code == 0 and "_COMPLETE=complete_bash" in result.output


def test_python_dash_m_runs_tito_and_tito_main_is_not_silent(project):
    env = dict(os.environ)
    version = subprocess.run(
        [sys.executable, "-m", "tito", "--version"], capture_output=True, text=True, env=env
    )
    assert version.returncode == 0 and version.stdout.startswith("tito ")
    bare = subprocess.run([sys.executable, "-m", "tito.cli.main"], capture_output=True, text=True)
    assert bare.returncode != 0 and "Usage: tito" in bare.stdout + bare.stderr


@pytest.mark.parametrize(
    "args", [("module", "open", "99", "--debug"), ("grade", "generate", "99", "--debug")]
)
def test_debug_is_accepted_anywhere(project, cli, args):
    result = cli(*args)
    assert result.exit_code != 0 and result.exception is not None  # the traceback, not a line
    assert "No such option" not in result.output


def _closure(module) -> set[int]:
    """Written out here, not taken from tito: the numbers `module` needs, at any depth."""
    by_number = {m.number: m for m in MODULES}
    need, todo = set(), list(module.requires)
    while todo:
        n = todo.pop()
        need.add(n)
        todo += [r for r in by_number[n].requires if r not in need]
    return need


def test_test_takes_a_name_and_all(project, cli, monkeypatch):
    import tito.cli.test as command
    from tito.student.runner import TestRun

    ran = []

    def fake(module, **_):
        ran.append(module.number)
        return TestRun(passed=1)

    monkeypatch.setattr(command, "run_tests", fake)
    assert cli("test", "tensor").exit_code == 0 and ran == [1]
    ran.clear()
    result = cli("test", "tensor", "--all")
    assert result.exit_code == 0, result.output
    assert ran == [1] + [m.number for m in MODULES if 1 in _closure(m)]
    ran.clear()
    assert cli("test", "--all").exit_code == 0 and ran == [m.number for m in MODULES]
    for base in MODULES:  # --all with a module: it and exactly its transitive dependents
        ran.clear()
        assert cli("test", base.slug, "--all").exit_code == 0
        builds_on = {m.number for m in MODULES if base.number in _closure(m)}
        assert ran[0] == base.number and sorted(ran[1:]) == sorted(builds_on), base.name
    ran.clear()
    assert cli("test", "losses", "--all").exit_code == 0
    assert {6, 11, 12} <= set(ran)  # the review's case: they build on 04 through 05
    assert "test [OPTIONS] [NAME]" in cli("test", "-h").output
    assert cli("test").exit_code == 1


def test_open_jupyter_without_jupyterlab_is_one_line_and_fails(project, cli, monkeypatch):
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if "jupyter" in name else real(name))
    result = cli("module", "open", "1", "--jupyter")
    assert result.exit_code == 1
    assert "JupyterLab is not installed" in result.stderr and "pip install jupyterlab" in (
        result.stderr
    )
    assert (project / "workspace/01_tensor/tensor.ipynb").exists()  # the notebook is still made
    assert "when it is done" not in result.output  # no next step after a step that failed


def test_open_without_jupyterlab_says_so_and_how_to_get_it(project, cli, monkeypatch):
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if "jupyter" in name else real(name))
    said = cli("module", "open", "1").stdout
    assert "JupyterLab is not installed here (pip install jupyterlab, then jupyter lab " in said
    assert "edit it in JupyterLab" not in said
    monkeypatch.setattr(
        shutil, "which", lambda name: "/bin/jupyter-lab" if "jupyter" in name else real(name)
    )
    said = cli("module", "open", "1").stdout
    assert "edit it in JupyterLab: jupyter lab " in said and "not installed" not in said


def test_every_command_is_summed_up_on_one_line_in_its_groups_help(cli, monkeypatch):
    """`tito --help` broke diagnose's description mid-sentence ("and" / "name the first ...")."""
    import typer
    from typer import rich_utils

    from tito.cli.main import app

    monkeypatch.setattr(rich_utils, "MAX_WIDTH", 400)  # wide enough that nothing wraps
    root = typer.main.get_command(app)
    checked = 0
    for path in _every_command(root):
        group = root
        for name in path:
            group = group.commands[name]
        listing = cli(*path, "--help").output.splitlines()
        for name, command in getattr(group, "commands", {}).items():
            summary = " ".join((command.help or "").split("\n\n")[0].split())
            (row,) = [line for line in listing if line.startswith(f"│ {name} ")]
            assert summary in row, (path, name)
            checked += 1
    assert checked > 20


def test_the_student_edition_names_the_install_the_readme_gives(project, cli, monkeypatch):
    from tito.curriculum.paths import PACKAGE_ROOT
    from tito.grading import edition

    made = edition.Edition(project.parent / "students", [], 10, 1000, "0123456789abc")
    monkeypatch.setattr(edition, "build", lambda out, published: made)
    result = cli("grade", "student-edition", str(made.folder))
    assert result.exit_code == 0
    command = result.stdout.split("students clone it and run ")[1].strip()
    assert command == "pip install -e ."
    student = (PACKAGE_ROOT / "README.md").read_text().split("## As a student")[1]
    assert f"\n{command} " in student


def test_a_file_that_cannot_be_written_is_named_in_one_line(project, cli, monkeypatch):
    from tito.curriculum import paths

    def refuse(path, text):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(paths, "_stage", refuse)
    result = cli("module", "open", "1")
    assert result.exit_code == 1
    assert "Permission denied: " in result.stderr and "tensor.ipynb" in result.stderr
    assert "Traceback" not in result.output


def _every_command(group, path=()):
    yield path
    for name, command in getattr(group, "commands", {}).items():
        yield from _every_command(command, (*path, name))


def test_flags_are_shown_as_flags_in_every_help(cli):
    """Issue 38: `--quick <bool>` read as an option taking a value, and `--quick true` failed."""
    import typer

    from tito.cli.main import app

    paths = list(_every_command(typer.main.get_command(app)))
    assert ("milestone", "run") in paths and len(paths) > 20
    for path in paths:
        result = cli(*path, "--help")
        assert result.exit_code == 0, path
        assert "<bool>" not in result.output, path
    shown = " ".join(cli("milestone", "run", "--help").output.split())
    assert "--quick A smaller model" in shown and "--allow-partial compress" in shown


@pytest.mark.parametrize("args", [("--help",), ("grade", "--help"), ("--version",)])
def test_a_reader_that_went_away_is_not_an_error(args):
    # `tito grade --help | head`: head may exit before tito writes; a pipe whose reading end is
    # already closed makes that certain. tito stops quietly, as cat does, with no "error:" line
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tito", *args], stdout=write, stderr=subprocess.PIPE, text=True
        )
    finally:
        os.close(write)
    assert done.returncode != 0  # its output was lost: not a success
    assert "error" not in done.stderr.lower() and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args", [("module", "open"), ("module", "reset"), ("grade", "generate"), ("grade", "report")]
)
def test_a_missing_module_argument_is_named_module(cli, args):
    result = cli(*args)
    assert result.exit_code == 2 and "MODULE" in result.output and "key" not in result.output


def test_paths_are_shown_as_a_student_can_use_them_where_tito_ran(tmp_path, monkeypatch):
    from tito.curriculum.paths import shown

    inside = tmp_path / "course" / "tinytorch" / "core" / "tensor.py"
    monkeypatch.chdir(tmp_path)
    assert shown(inside) == "course/tinytorch/core/tensor.py"  # relative where it ran
    monkeypatch.chdir("/")
    assert shown(inside) == str(inside.resolve())  # from the root: absolute, not "tmp/..."
    elsewhere = tmp_path / "a"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert shown(inside) == str(inside.resolve())
