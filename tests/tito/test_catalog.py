"""The module table is the single source of truth; everything it names exists."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinytorch.names import home, offered
from tito.curriculum import exporter, notebooks, staging
from tito.curriculum.catalog import GIVEN_REQUIRES, MODULES, closure, find, number_ranges
from tito.curriculum.paths import PACKAGE_ROOT

LINE_BUDGET = 500


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_every_entry_exists_on_disk(module):
    assert (PACKAGE_ROOT / module.source).is_file()
    assert (PACKAGE_ROOT / module.tests).is_dir()
    assert list((PACKAGE_ROOT / module.tests).glob(f"test_{module.slug}_*.py"))
    for path in module.package_files():
        assert (PACKAGE_ROOT / path).is_file()
    assert all(n < module.number for n in module.requires)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_release_notebook_has_no_solution_line(module):
    source = notebooks.read_source(PACKAGE_ROOT / module.source)
    secret = notebooks.secret_lines(source)
    assert secret, "a module without student regions teaches nothing"
    release = notebooks.student_notebook(module, PACKAGE_ROOT / module.source)
    shown = {line.strip() for cell in release.cells for line in cell.source.splitlines()}
    leaked = {line for line in secret & shown if len(line) > 12 and not line.startswith("#")}
    assert not leaked
    assert "### BEGIN HIDDEN TESTS" not in "".join(cell.source for cell in release.cells)


# A module's tests, with the shared test files they import (tests/fdcheck.py, tests/oracle.py,
# tests/conftest.py), reach only the package a student has who wrote that module and its closure:
# its reference, the closure's, the __init__ files and the given files whose requirements lie in
# the closure (what tito/curriculum/staging.py stages). A student edition stubs every module not
# yet published, so module 03's tests may not build an nn.ReLU (module 02) even though 02 comes
# earlier. The reader follows the names tinytorch resolves lazily (tinytorch/names.py):
# `import tinytorch.nn as nn; nn.ReLU()`, `tinytorch.nn.functional.relu`.
TESTS = PACKAGE_ROOT / "tests"


def package_file(dotted: str) -> Path | None:
    """The file of the module `dotted` names under the project root, or None (not a module)."""
    path = PACKAGE_ROOT / Path(*dotted.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def reaches(dotted: str) -> tuple[list[str], tuple[str, str | None]]:
    """The package files that using `dotted` (tinytorch.nn.ReLU, tinytorch.core.losses.mse_loss)
    imports, as the catalog writes them: the modules on the way and, for a name a path resolves
    lazily, that name's home (tinytorch/names.py). Also what to look up to use it: the last
    module on the way and the name read off it (None: the module itself)."""
    parts = dotted.split(".")
    files, here = [package_file(parts[0])], parts[0]
    for name in parts[1:]:
        if package_file(f"{here}.{name}") is None:
            if name in offered(here):
                files.append(package_file(home(name, here)))
            break
        here = f"{here}.{name}"
        files.append(package_file(here))
    rest = parts[len(here.split(".")) :]
    return [f.relative_to(PACKAGE_ROOT).as_posix() for f in files], (here, (rest or [None])[0])


def tinytorch_uses(tree: ast.AST) -> set[str]:
    """Every dotted tinytorch name a file uses: what it imports, and each attribute it reads off
    a name bound to tinytorch (`nn.ReLU` after `import tinytorch.nn as nn`), however deep."""
    bound: dict[str, set[str]] = {}
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tinytorch":
                    used.add(alias.name)
                    name = alias.asname or "tinytorch"
                    bound.setdefault(name, set()).add(alias.name if alias.asname else name)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] != "tinytorch":
                continue
            used.add(node.module)
            for alias in node.names:
                if alias.name == "*":
                    used |= {f"{node.module}.{n}" for n in offered(node.module)}
                else:
                    used.add(f"{node.module}.{alias.name}")
                    bound.setdefault(alias.asname or alias.name, set()).add(
                        f"{node.module}.{alias.name}"
                    )
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, value = [], node
        while isinstance(value, ast.Attribute):
            chain.insert(0, value.attr)
            value = value.value
        if not isinstance(node.ctx, ast.Load):
            chain.pop()  # `nn.Linear.weight = w` reads nn.Linear, and sets the rest
        if isinstance(value, ast.Name):
            used |= {".".join([start, *chain]) for start in bound.get(value.id, ())}
    return used


def shared_test_files(tree: ast.AST, folder: Path) -> list[Path]:
    """The files of tests/ that a test file in `folder` imports (pytest puts its own folder and
    tests/ on the path): `import oracle`, `from fdcheck import check_function`."""
    dotted = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            dotted |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    found = set()
    for name in dotted:
        parts = name.split(".")
        for base in (folder, TESTS):
            for n in range(1, len(parts) + 1):
                path = base / Path(*parts[:n])
                found |= {p for p in (path / "__init__.py", path.with_suffix(".py")) if p.is_file()}
    return sorted(found)


def reached_by_tests(module) -> dict[str, set[str]]:
    """The dotted tinytorch names `module`'s tests use, directly or through the files of tests/
    they import (and tests/conftest.py), each with the files that use it."""
    todo = [*sorted((PACKAGE_ROOT / module.tests).rglob("*.py")), TESTS / "conftest.py"]
    seen, used = set(), {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for dotted in tinytorch_uses(tree):
            used.setdefault(dotted, set()).add(path.relative_to(TESTS).as_posix())
        todo += shared_test_files(tree, path.parent)
    return used


def closure_files(module) -> set[str]:
    """The package files a package of `module` and its closure holds (the rule, by number)."""
    allowed = {module.number} | {m.number for m in closure(module)}
    written = {p.as_posix() for m in MODULES if m.number in allowed for p in m.package_files()}
    given = {path for path, needs in GIVEN_REQUIRES.items() if set(needs) <= allowed}
    frame = {
        p.relative_to(PACKAGE_ROOT).as_posix()
        for p in PACKAGE_ROOT.glob("tinytorch/**/__init__.py")
    }
    return written | given | frame


def owner(path: str) -> str:
    for m in MODULES:
        if path in {p.as_posix() for p in m.package_files()}:
            return f"module {m.name}"
    needs = GIVEN_REQUIRES.get(path)
    return (
        "no module"
        if needs is None
        else f"a given file needing {number_ranges(needs) or 'nothing'}"
    )


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_tests_reach_only_the_modules_closure(module):
    allowed = closure_files(module)
    outside = [
        f"{', '.join(sorted(by))} uses {dotted}: {path} is {owner(path)}"
        for dotted, by in sorted(reached_by_tests(module).items())
        for path in reaches(dotted)[0]
        if path not in allowed
    ]
    needs = number_ranges(tuple(m.number for m in closure(module))) or "nothing"
    assert not outside, f"{module.name} requires {needs}: " + "; ".join(outside)


# run in the staged package: each (module, name) imported, the name read off it (lazily resolved
# names import their home then); prints the ones that fail
RESOLVE = """
import importlib, json, sys
import tinytorch
assert tinytorch.__file__.startswith(sys.argv[1]), tinytorch.__file__
failed = []
for module, name in json.loads(sys.argv[2]):
    try:
        found = importlib.import_module(module)
        if name is not None:
            getattr(found, name)
    except Exception as err:
        failed.append(f"{module} {name or ''}: {type(err).__name__}: {err}")
print(json.dumps(failed))
"""


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_tests_names_resolve_in_a_package_of_the_closure_alone(module, tmp_path):
    """The same rule, run: in the package staged for the module's tests (tito/curriculum/staging.py:
    the closure's reference, the given files it allows) with the module's own reference written
    in, every name its tests and their shared files use imports."""
    package = staging.stage_reference(module, tmp_path)
    exporter.write(staging.reference_files(module), package)
    wanted = sorted({reaches(dotted)[1] for dotted in reached_by_tests(module)}, key=str)
    run = subprocess.run(
        [sys.executable, "-c", RESOLVE, str(package), json.dumps(wanted)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == [], module.name


def test_the_test_reader_sees_lazy_names_and_shared_test_files():
    sample = ast.parse(
        "import tinytorch.nn as nn\n"
        "import tinytorch\n"
        "from tinytorch.nn import functional as F\n"
        "from fdcheck import check_function\n"
        "def test():\n"
        "    nn.ReLU()(tinytorch.nn.functional.softmax(F.mse_loss(x, y)).data)\n"
        "    nn.Linear.weight = 1\n"
    )
    used = tinytorch_uses(sample)
    assert {
        "tinytorch.nn.ReLU",
        "tinytorch.nn.functional.softmax",
        "tinytorch.nn.functional.mse_loss",
    } <= used
    assert "tinytorch.nn.Linear" in used and "tinytorch.nn.Linear.weight" not in used
    assert reaches("tinytorch.nn.ReLU.forward") == (
        ["tinytorch/__init__.py", "tinytorch/nn/__init__.py", "tinytorch/core/activations.py"],
        ("tinytorch.nn", "ReLU"),
    )
    assert reaches("tinytorch.core.losses.mse_loss")[1] == ("tinytorch.core.losses", "mse_loss")
    assert reaches("tinytorch.nn.functional")[1] == ("tinytorch.nn.functional", None)
    assert shared_test_files(sample, TESTS / "04_losses") == [TESTS / "fdcheck.py"]
    assert "tinytorch/core/activations.py" not in closure_files(find(3))
    assert "tinytorch/core/activations.py" in closure_files(find(5))


def test_every_graded_cell_is_a_probe():
    """The judge compares a probe's numbers (tito/grading/judge.py); a plain assert cell cannot be
    judged, so every test in a graded cell is an @graded probe (it runs when defined)."""
    for module in MODULES:
        nb = notebooks.read_source(PACKAGE_ROOT / module.source)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade"):
                names = re.findall(r"^def (test_\w+)", cell.source, re.M)
                assert names, f"{module.name}: graded cell without a test"
                for name in names:
                    probe = re.search(rf"^@graded\(.*\)\ndef {name}\(rng\)", cell.source, re.M)
                    assert probe, f"{module.name}: {name} is not an @graded probe"


def test_exported_files_keep_their_line_budget():
    files = list(Path(PACKAGE_ROOT, "tinytorch").rglob("*.py")) + list(
        Path(PACKAGE_ROOT, "tito").rglob("*.py")
    )
    too_long = [f.name for f in files if len(f.read_text().splitlines()) > LINE_BUDGET]
    assert not too_long


def test_machinery_heavy_lessons_stay_an_afternoon_long():
    # issue 37: modules 14 (counting and measuring) and 18 (the fused kernels) read in an hour or
    # two once their product code became given files; a loop or report that grows back into the
    # lesson belongs in tinytorch/ (module 18's block loops are tinytorch/accel/fused.py)
    for number in (14, 18):
        source = Path(PACKAGE_ROOT, find(number).source)
        assert len(source.read_text().splitlines()) <= 600, f"{source.name} is over 600 lines"


def test_find_by_number_and_name():
    assert find("13") is find("transformers") is find(13) is find("13_transformers")


def test_export_is_deterministic():
    module = find(1)
    one = exporter.render(notebooks.read_source(PACKAGE_ROOT / module.source), module, "x")
    two = exporter.render(notebooks.read_source(PACKAGE_ROOT / module.source), module, "x")
    assert one == two


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_export_cells_carry_no_name_guard(module):
    # the exporter imports a name one export file uses from the sibling file that defines it, so
    # no cell needs `if __name__ != "__main__":` to behave differently in the notebook
    nb = notebooks.read_source(PACKAGE_ROOT / module.source)
    for cell in nb.cells:
        exported = any(name == "export" for name, _ in notebooks.directives(cell.source))
        assert not (exported and re.search(r"^if __name__\s*[!=]=", cell.source, re.M)), module.name


def test_given_product_code_is_not_also_in_a_lesson():
    from tito.curriculum.catalog import GIVEN

    given = set()
    for rel in GIVEN:
        names, _ = exporter.public_names((PACKAGE_ROOT / rel).read_text(encoding="utf-8"))
        given |= set(names) - {"__all__"}
    assert {"save_gpt2", "Seq2SeqTransformer", "estimate_memory", "keep_freed_memory"} <= given
    for module in MODULES:
        source = (PACKAGE_ROOT / module.source).read_text(encoding="utf-8")
        defined = set(re.findall(r"^(?:def|class) (\w+)", source, re.M))
        assert not defined & given, f"{module.name} also defines {sorted(defined & given)}"


def test_generation_has_one_sampling_loop():
    # issue 34: the token-sampling loop existed four times; every generate now hands the given
    # sampling_loop how to get the next logits, so only it draws tokens (tests may call the draw)
    callers = []
    for path in [
        *(PACKAGE_ROOT / "tinytorch").rglob("*.py"),
        *(PACKAGE_ROOT / "milestones").glob("*.py"),
    ]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "sample_next":
                callers.append(path.relative_to(PACKAGE_ROOT).as_posix())
    assert callers == ["tinytorch/models/decoding.py"]
