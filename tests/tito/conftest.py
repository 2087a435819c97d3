"""A throwaway copy of the project for CLI tests, so nothing in the real tree changes; one
released course folder per module, shared by the grading tests."""

import shutil
from pathlib import Path

import postgres_server
import pytest
from typer.testing import CliRunner

from tito.curriculum.paths import PACKAGE_ROOT


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis")
    for name in ("modules", "tinytorch"):
        shutil.copytree(PACKAGE_ROOT / name, root / name, ignore=ignore)
    (root / "tests").mkdir()
    for name in ("conftest.py", "fdcheck.py", "oracle.py"):
        shutil.copy2(PACKAGE_ROOT / "tests" / name, root / "tests" / name)
    for name in ("01_tensor", "05_autograd"):
        shutil.copytree(PACKAGE_ROOT / "tests" / name, root / "tests" / name, ignore=ignore)
    shutil.copy2(PACKAGE_ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "data").mkdir()  # the committed data file: module 08's digits
    shutil.copy2(PACKAGE_ROOT / "data" / "digits.csv.gz", root / "data" / "digits.csv.gz")
    monkeypatch.setenv("TITO_ROOT", str(root))
    monkeypatch.setenv("TITO_DEBUG", "0")  # and restored after the test, which --debug changes
    return root


@pytest.fixture
def cli():
    from tito.cli.main import app

    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, list(args))

    return invoke


def notebook_path(root: Path, name: str, slug: str) -> Path:
    return root / "workspace" / name / f"{slug}.ipynb"


@pytest.fixture(scope="session")
def postgres():
    """The URL of a PostgreSQL server to create databases on: found, or started for the session."""
    try:
        with postgres_server.server() as url:
            yield url
            return
    except postgres_server.Unavailable as err:
        reason = str(err)
    pytest.fail(reason, pytrace=False)  # outside the except: one line, no chained traceback


@pytest.fixture(scope="session")
def released(tmp_path_factory):
    """`released(folder, number, timeout=None)` makes `folder` a course with module `number`
    released and nothing submitted, as `tito grade init folder --timeout T` (no timeout: init's
    default) then `tito grade generate N` leave it. The first call for a module runs both (a new
    gradebook costs several seconds); later calls copy that folder and run `init` again on the
    copy (its timeout, its own files). Each caller owns its copy, so the tests stay independent
    of each other and of their order."""
    from tito.cli.main import app

    runner = CliRunner()
    made: dict[int, Path] = {}

    def invoke(*args) -> None:
        done = runner.invoke(app, [str(a) for a in args])
        assert done.exit_code == 0, done.output

    def release(folder: Path, number: int, timeout: int | None = None) -> Path:
        if number not in made:
            first = tmp_path_factory.mktemp(f"released{number:02d}") / "course"
            invoke("grade", "init", first)
            invoke("grade", "generate", number, "--course", first)
            made[number] = first
        shutil.copytree(made[number], folder, dirs_exist_ok=True)
        invoke("grade", "init", folder, *(["--timeout", timeout] if timeout else []))
        return folder

    return release
