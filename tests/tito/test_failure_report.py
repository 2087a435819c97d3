"""What a student sees when their code fails: test names, first messages, notebook cells; and
the bounds on a run (a timeout that stops every process, output that cannot fill memory)."""

import re
import subprocess
import sys
import textwrap

import nbformat
import pytest

from tito.curriculum import notebooks
from tito.curriculum.catalog import CourseModule, find

FAKE = CourseModule(99, "fake", "Fake", (), (), "tests/99_fake")


def notebook_path(root, name: str, slug: str):
    return root / "workspace" / name / f"{slug}.ipynb"


def write_notebook(root, replace: str, by: str):
    """The reference notebook of module 01 with one line of the student's changed."""
    nb = notebooks.read_source(root / find(1).source)
    cells = [c for c in nb.cells if replace in c.source]
    cells[0].source = cells[0].source.replace(replace, by, 1)
    path = notebook_path(root, "01_tensor", "tensor")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return nb


def cell_line(nb, text: str) -> tuple[int, int, str]:
    """The cell and line a report names, and the notebook's text at that place."""
    match = re.search(r"cell (\d+), line (\d+): (.*)", text)
    assert match, text
    cell, line = int(match.group(1)), int(match.group(2))
    return cell, line, nb.cells[cell - 1].source.splitlines()[line - 1]


def test_failing_tests_are_named_with_their_message_and_notebook_cell(project, cli, monkeypatch):
    cli("module", "open", "1")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k 'autograd_hook or scalars_do_not'")
    result = cli("module", "complete", "1")
    assert result.exit_code == 1
    out = result.stdout
    assert "FAILED tests/01_tensor/test_tensor_ops.py::test_scalars_do_not_promote" in out
    assert "test_backward_without_autograd_hook_is_explained" in out
    assert "NotImplementedError: module 01 tensor: write this part" in out
    assert "Expected regex" not in out and "tito-stage" not in result.output
    at = next(line for line in out.splitlines() if line.strip().startswith("at tensor.ipynb"))
    nb = nbformat.read(notebook_path(project, "01_tensor", "tensor"), as_version=4)
    cell, line, source = cell_line(nb, at)
    assert "raise NotImplementedError" in source and source.strip() in at
    assert "2 failed" in result.stderr and "not recorded" in result.stderr


def test_a_syntax_error_is_one_line_at_the_notebook_cell_and_runs_no_test(project, cli):
    nb = write_notebook(project, "        return a + b\n", "        return a + (b\n")
    result = cli("module", "complete", "1")
    assert result.exit_code == 1
    assert result.stderr.count("SyntaxError") == 1 and "tito-stage" not in result.output
    cell, line, source = cell_line(nb, result.stderr)
    assert source == "        return a + (b"
    assert "passed" not in result.output  # no test ran


@pytest.fixture
def fake_tests(project):
    folder = project / FAKE.tests
    folder.mkdir()

    def write(body: str):
        (folder / "test_fake.py").write_text(textwrap.dedent(body))

    return write


def test_a_timeout_stops_the_whole_process_group_and_says_where(
    project, fake_tests, tmp_path, capsys
):
    from tito.cli.report import show_run
    from tito.student.runner import run_tests

    marker = tmp_path / "child.pid"
    fake_tests(
        f"""
        import subprocess, sys

        def test_fast():
            assert True

        def test_endless():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            open({str(marker)!r}, "w").write(str(child.pid))
            while True:
                pass
        """
    )
    run = run_tests(FAKE, timeout=10)  # generous: starting pytest on a busy machine takes seconds
    assert not run.ok and run.passed == 1
    assert run.timed_out.startswith("tests/99_fake/test_fake.py::test_endless (at ")
    assert re.search(r"test_fake.py, line 1[01]: (while True:|pass)\)$", run.timed_out)
    pid = int(marker.read_text())
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    assert state.stdout.strip()[:1] in ("", "Z")  # gone (or a zombie awaiting its reaper)
    show_run(run, "fake")
    said = capsys.readouterr().err
    assert "fake: timed out: the tests ran past the 10 s limit and were stopped" in said
    assert "test_fake.py, line 1" in said
    assert "--timeout SECONDS or TITO_TEST_TIMEOUT" in said


def test_parametrized_test_ids_keep_their_brackets(capsys):
    # rich reads `[shape0-gelu]` as a markup tag and drops it; every id must reach the student
    from tito.cli.report import show_run
    from tito.student.runner import Failure, TestRun

    test = "tests/02_activations/test_gelu.py::test_forward_and_backward_match_torch"
    ids = [f"{test}[shape{n}-GELUFunction-kwargs3-gelu]" for n in range(3)]
    ids.append(f"{test}[/bad][link=x]")
    failures = [Failure(i, "AssertionError: [gelu] values differ", ["gelu.py:3"]) for i in ids]
    show_run(TestRun(passed=1, failed=4, failures=failures, returncode=1), "module 02_activations")
    shown = capsys.readouterr().out.splitlines()
    assert [line for line in shown if line.startswith("FAILED")] == [f"FAILED {i}" for i in ids]
    assert "    AssertionError: [gelu] values differ" in shown


def test_timeout_option_and_variable_are_checked(monkeypatch):
    from tito.errors import TitoError
    from tito.student.runner import DEFAULT_TIMEOUT, timeout_seconds

    monkeypatch.delenv("TITO_TEST_TIMEOUT", raising=False)
    assert timeout_seconds() == DEFAULT_TIMEOUT and timeout_seconds(5) == 5
    monkeypatch.setenv("TITO_TEST_TIMEOUT", "12")
    assert timeout_seconds() == 12
    monkeypatch.setenv("TITO_TEST_TIMEOUT", "soon")
    with pytest.raises(TitoError, match="TITO_TEST_TIMEOUT"):
        timeout_seconds()
    with pytest.raises(TitoError, match="--timeout"):
        timeout_seconds(-1)


def test_a_flood_of_prints_keeps_memory_bounded(project, fake_tests):
    # 300 MB printed: pytest's own capture would hold it in memory, tito's pipe keeps a tail
    fake_tests(
        """
        def test_loud():
            for _ in range(30):
                print("x" * 10_000_000)
        """
    )
    code = (
        "import resource; from tito.student.runner import run_tests; "
        "from tito.curriculum.catalog import CourseModule; "
        "run = run_tests(CourseModule(99, 'fake', 'Fake', (), (), 'tests/99_fake'), timeout=300); "
        "kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
        # VmHWM, not RUSAGE_SELF: Linux carries ru_maxrss across exec from the forking pytest
        "me = next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')); "
        "me = int(me.split()[1]); "
        "print(run.ok, run.passed, len(run.output), kids // 1024, me // 1024)"
    )
    from tito.curriculum.paths import PACKAGE_ROOT

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE_ROOT, check=True
    ).stdout.split()
    ok, passed, kept, child_mb, parent_mb = out
    assert ok == "True" and passed == "1"
    assert int(kept) < 100_000 and int(child_mb) < 250 and int(parent_mb) < 250, out


def test_tito_test_maps_failures_to_the_notebook_the_package_came_from(project, cli, monkeypatch):
    from tito.curriculum import exporter

    cli("module", "open", "1")
    path = notebook_path(project, "01_tensor", "tensor")
    nb = nbformat.read(path, as_version=4)
    files = exporter.render(nb, find(1), origin="workspace/01_tensor/tensor.ipynb")
    exporter.write(files, project / "tinytorch")  # as if this notebook had been installed
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k autograd_hook")
    result = cli("test", "1")
    assert result.exit_code == 1
    cell, line, source = cell_line(nb, result.stdout)
    assert "raise NotImplementedError" in source


def test_a_wrong_backward_points_at_the_students_backward_and_names_the_operand(
    project, cli, monkeypatch
):
    """Issue 38: Sub.backward with the sign of b's gradient wrong was reported at numpy's
    utils.py as "Sub: gradient of input 1"; it names the operand and the student's cell."""
    nb = write_notebook(project, "        return grad, -grad\n", "        return grad, grad\n")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k 'local_backward_rules and Sub'")
    result = cli("module", "complete", "1")
    assert result.exit_code == 1
    out = " ".join(result.stdout.split())
    assert "Sub.backward: the gradient of the second operand (b in a - b) is wrong" in out
    assert "utils.py" not in out and "site-packages" not in out
    at = next(line for line in result.stdout.splitlines() if line.strip().startswith("at "))
    cell, _, source = cell_line(nb, at)
    assert source.strip() == "def backward(self, grad):"
    assert "return grad, grad" in nb.cells[cell - 1].source  # the cell holding the broken line


def test_a_virtual_environment_inside_the_clone_is_never_the_place(tmp_path):
    """A student's .venv inside the clone: numpy's assert line is not where the test failed."""
    from tito.student.runner import _places

    test = tmp_path / "tests" / "01_tensor" / "test_x.py"
    numpy_file = tmp_path / ".venv/lib/python3.12/site-packages/numpy/testing/utils.py"
    for path in (test, numpy_file):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\ny = 2\n")
    frames = [[str(test), 2], [str(numpy_file), 1]]
    assert _places(frames, tmp_path / "tinytorch", tmp_path, None) == [
        "tests/01_tensor/test_x.py, line 2: y = 2"
    ]
