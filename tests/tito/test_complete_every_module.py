"""Every module in the catalog, through the CLI: the stubbed notebook fails, the reference passes.

One walk in course order, because each module is tested against the package that its
prerequisites' completions left behind. The walk proves the lifecycle (export, staging on what
the prerequisites left, install, progress), not the module's tests, which the suite runs once
directly (tests/NN_slug): each `complete` here runs one test file of its module.
"""

import json
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from tito.curriculum import notebooks
from tito.curriculum.catalog import MODULES, find
from tito.curriculum.paths import PACKAGE_ROOT
from tito.curriculum.program import build_program


@pytest.fixture
def course(project):
    """The temporary project with every module's tests and the shared test helpers."""
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis")
    for path in (PACKAGE_ROOT / "tests").glob("*.py"):
        shutil.copy2(path, project / "tests" / path.name)
    for module in MODULES:
        if not (project / module.tests).exists():
            shutil.copytree(PACKAGE_ROOT / module.tests, project / module.tests, ignore=ignore)
    return project


def first_test_file(root, module) -> str:
    """The stem of the module's first test file, as a -k expression selects it."""
    return sorted((root / module.tests).glob("test_*.py"))[0].stem


def completed(root) -> dict:
    path = root / ".tito" / "progress.json"
    return json.loads(path.read_text())["completed"] if path.exists() else {}


def test_every_module_fails_on_its_stubs_and_passes_on_the_reference(course, cli, monkeypatch):
    for module in MODULES:
        label = f"module {module.name}"
        package = {path: (course / path).read_text() for path in module.package_files()}

        # The student's notebook as `open` makes it. One failing test proves the point, so the
        # stubbed run stops at the first failure (-x) instead of running the whole suite.
        assert cli("module", "open", str(module.number)).exit_code == 0, label
        monkeypatch.setenv("PYTEST_ADDOPTS", "-x")
        stubbed = cli("module", "complete", str(module.number))
        monkeypatch.delenv("PYTEST_ADDOPTS")
        assert stubbed.exit_code == 1, f"{label} passed with its solutions removed"
        assert "failed" in stubbed.output and "not recorded" in stubbed.output, label
        assert str(module.number) not in completed(course), label
        if module is MODULES[0]:  # a failed first module leaves no progress file at all
            assert not (course / ".tito" / "progress.json").exists()
        for path, text in package.items():
            assert (course / path).read_text() == text, f"{label}: a failed attempt changed {path}"

        # The reference solution, written where the student's notebook lives; one test file,
        # and the notebook's graded checks (which `complete` runs as tests) all pass on it.
        solved = notebooks.read_source(course / module.source)
        nbformat.write(solved, course / "workspace" / module.name / f"{module.slug}.ipynb")
        monkeypatch.setenv("PYTEST_ADDOPTS", f"-k '{first_test_file(course, module)} or graded'")
        result = cli("module", "complete", str(module.number))
        monkeypatch.delenv("PYTEST_ADDOPTS")
        assert result.exit_code == 0, f"{label} failed on the reference:\n{result.output}"
        record = completed(course)[str(module.number)]
        assert record["passed"] > 0 and record["failed"] == 0, label
        checks = len(build_program(solved, solved).checks)
        assert re.search(rf"{module.slug}\.ipynb +{checks} passed", result.stdout), label
        origin = f"workspace/{module.name}/{module.slug}.ipynb"
        for path in module.package_files():
            assert origin in (course / path).read_text(), f"{label}: {path} not from the notebook"

    assert sorted(int(n) for n in completed(course)) == [m.number for m in MODULES]

    # The course page's direct command selects the transformer suite, and the count that
    # `complete 13` recorded is the real number of the tests it selected.
    collect = [
        sys.executable,
        "-m",
        "pytest",
        "tests/",
        "-k",
        "transformers",
        "--collect-only",
        "-q",
    ]
    listing = subprocess.run(collect, cwd=course, capture_output=True, text=True, check=True).stdout
    selected = [line for line in listing.splitlines() if "::" in line]
    assert selected and all(line.startswith("tests/13_transformers/") for line in selected)
    first = [line for line in selected if first_test_file(course, find(13)) in line]
    source = notebooks.read_source(course / find(13).source)
    checks = len(build_program(source, source).checks)
    assert len(first) + checks == completed(course)["13"]["passed"]
