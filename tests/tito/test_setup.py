"""The README's two set-up commands and what they run: the Makefile, .ci/run, the venv step."""

import os
import re
import subprocess

from tito.curriculum.paths import PACKAGE_ROOT

README = (PACKAGE_ROOT / "README.md").read_text()
MAKEFILE = (PACKAGE_ROOT / "Makefile").read_text()


def quick_start() -> list[str]:
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", README, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines()]


def dry_run(*args, **env) -> str:
    # Run as a make of its own: not inside an outer `make test` (whose MAKEFLAGS would print
    # "Entering directory" lines), not with the caller's venv.
    outer = ("VIRTUAL_ENV", "PYTHON", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
    environment = {k: v for k, v in os.environ.items() if k not in outer}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", *args],
        cwd=PACKAGE_ROOT,
        env={**environment, **env},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_quick_start_makes_and_activates_a_venv_then_runs_make_test():
    lines = quick_start()
    assert lines[0] == "python3 -m venv .venv && . .venv/bin/activate"
    assert lines[-1] == "make test"
    assert ".venv/" in (PACKAGE_ROOT / ".gitignore").read_text().splitlines()


def test_ci_runs_the_readme_test_command_last():
    lines = [
        line for line in (PACKAGE_ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]  # fmt: skip
    assert lines[-1] == quick_start()[-1]


def test_make_test_calls_every_tool_through_the_chosen_python():
    recipes = [line.strip() for line in MAKEFILE.splitlines() if line.startswith("\t")]
    tools = ("ruff", "tito", "pytest", "pip")
    for line in recipes:
        first = line.lstrip("@").split()[0]
        assert first not in tools, f"bare `{first}` in the Makefile: call it as $(PYTHON) -m"
    commands = dry_run("test", "PYTHON=/opt/py/bin/python").splitlines()
    for tool in tools:
        assert any(c.startswith(f"/opt/py/bin/python -m {tool} ") for c in commands), tool


def test_without_an_active_venv_make_test_uses_and_makes_dot_venv():
    commands = dry_run("-B", "test").splitlines()
    assert commands[0] == "python3 -m venv .venv"
    text = "\n".join(commands)
    assert ".venv/bin/python -m pytest -q -p no:cacheprovider --half 2" in text
    assert ".venv/bin/python -m pytest -q --half 1" in text


def test_an_active_venv_is_the_one_make_test_uses():
    commands = dry_run("test", VIRTUAL_ENV="/opt/env").splitlines()
    text = "\n".join(commands)
    assert "/opt/env/bin/python -m pytest -q --half 1" in text and "--half 2" in text
    assert not any("venv" in c and "/opt/env" not in c for c in commands)


def test_make_test_requires_torch_for_the_torch_checks():
    commands = dry_run("test", "PYTHON=/opt/py/bin/python", "--print-data-base").splitlines()
    assert "test: TINYTORCH_REQUIRE_TORCH = 1" in {c.strip() for c in commands}


def test_make_tests_two_halves_run_every_test_once():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "suite_conftest", PACKAGE_ROOT / "tests/conftest.py"
    )
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    assert suite.half_of("tests/tito/test_grade.py::test_one[module01]") == 1
    for walk in suite.SECOND_HALF:
        assert (PACKAGE_ROOT / walk).is_file() and suite.half_of(f"{walk}::test[1]") == 2
    assert suite.half_of("tests/01_tensor/test_tensor_ops.py::test_add") == 2
    assert suite.half_of("tests/tito_like/test_x.py::test") == 2
    recipe = MAKEFILE.split("\ntest: install", 1)[1].split("\n\n", 1)[0]
    assert "--half 1" in recipe and "--half 2" in recipe and "test $$first = 0" in recipe
