"""The import rules of docs/DESIGN.md, read from the code itself: every file of tinytorch, tito,
milestones and benchmarks, by its syntax tree (an import inside a function counts as lazy)."""

import ast
import sys
from pathlib import Path

import pytest

from tito.curriculum.catalog import GIVEN, GIVEN_REQUIRES, MODULES, closure
from tito.curriculum.paths import PACKAGE_ROOT

# what tinytorch may load besides numpy and the standard library, and only lazily (inside a
# function): plots, BLAS thread limits, the Hugging Face export's file format
OPTIONAL = {"matplotlib", "threadpoolctl", "safetensors"}
# the tito files that may use tinytorch (inside a function): carrying a trained model and measuring
# the class's olympics entries, which need the package; the tracer, a child process that runs the
# student's code
OLYMPICS = {"tito/grading/class_olympics.py", "tito/cli/olympics.py"}
TITO_USES_TINYTORCH = {
    "tito/cli/model.py", "tito/sandbox/trace_runner.py", "tito/sandbox/check_runner.py", *OLYMPICS
}  # fmt: skip
TITO_USES_MILESTONES = {"tito/cli/milestone.py", "tito/cli/model.py", *OLYMPICS}


def files(folder: str) -> list[Path]:
    return sorted((PACKAGE_ROOT / folder).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE_ROOT).as_posix()


def imports(path: Path) -> list[tuple[str, bool]]:
    """(dotted module, imported at the top level) for every import in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    for node in tree.body:  # an `if TYPE_CHECKING:` block never runs
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            top |= {id(n) for n in ast.walk(node)}
            for n in ast.walk(node):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    n.type_checking = True
    found = []
    for node in ast.walk(tree):
        if getattr(node, "type_checking", False):
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:  # `from tinytorch.models import transformer` is a file
                dotted = f"{node.module}.{alias.name}"
                is_file = (PACKAGE_ROOT / Path(*dotted.split("."))).with_suffix(".py").is_file()
                found.append((dotted if is_file else node.module, id(node) in top))
    return found


def owner(dotted: str) -> str:
    """The package file `dotted` names, as tito/curriculum/catalog.py writes paths."""
    path = Path(*dotted.split("."))
    return (
        path / "__init__.py" if (PACKAGE_ROOT / path).is_dir() else path.with_suffix(".py")
    ).as_posix()


def allowed_modules(path: str) -> set[int] | None:
    """The course modules a package file may import at the top level (None: any, __init__)."""
    for module in MODULES:
        if path in {p.as_posix() for p in module.package_files()}:
            return {module.number} | {m.number for m in closure(module)}
    if path in GIVEN_REQUIRES:
        needs = GIVEN_REQUIRES[path]
        return set(needs) | {m.number for m in closure(tuple(needs))}
    return None


PACKAGE = files("tinytorch")


@pytest.mark.parametrize("path", PACKAGE, ids=rel)
def test_tinytorch_imports_numpy_the_stdlib_and_optional_packages_lazily(path):
    for dotted, at_top in imports(path):
        root = dotted.split(".")[0]
        if root in sys.stdlib_module_names or root in ("numpy", "tinytorch"):
            continue
        assert root in OPTIONAL and not at_top, f"{rel(path)} imports {dotted}"


@pytest.mark.parametrize("path", PACKAGE, ids=rel)
def test_a_package_file_imports_only_the_modules_it_requires(path):
    homes = {p.as_posix(): m.number for m in MODULES for p in m.package_files()}
    mine = allowed_modules(rel(path))
    for dotted, at_top in imports(path):
        if not dotted.startswith("tinytorch.") or not at_top:
            continue  # a lazy import finds a later module when it is there (module 17's cache)
        target = owner(dotted)
        if target in GIVEN or target.endswith("__init__.py"):
            needs = GIVEN_REQUIRES.get(target, ())
            assert mine is None or set(needs) <= mine, f"{rel(path)} imports {dotted}"
            continue
        assert target in homes, f"{rel(path)} imports {dotted}, which no module writes"
        assert mine is None or homes[target] in mine, (
            f"{rel(path)} imports {dotted} of module {homes[target]:02d}, which it does not require"
        )


@pytest.mark.parametrize("path", files("tito"), ids=rel)
def test_tito_uses_tinytorch_and_milestones_only_where_design_says_and_never_benchmarks(path):
    text = path.read_text(encoding="utf-8")
    assert 'import_module("benchmarks' not in text and "import_module('benchmarks" not in text
    for dotted, at_top in imports(path):
        root = dotted.split(".")[0]
        assert root != "benchmarks", f"{rel(path)} imports {dotted}: benchmarks imports tito"
        if root == "tinytorch":
            assert rel(path) in TITO_USES_TINYTORCH and not at_top, f"{rel(path)}: {dotted}"
        if root == "milestones":
            assert rel(path) in TITO_USES_MILESTONES, f"{rel(path)} imports {dotted}"


@pytest.mark.parametrize("path", files("milestones"), ids=rel)
def test_milestones_never_import_tito_or_benchmarks(path):
    for dotted, _ in imports(path):
        assert dotted.split(".")[0] not in ("tito", "benchmarks"), f"{rel(path)} imports {dotted}"


def test_the_rules_see_the_imports_they_forbid(tmp_path, monkeypatch):
    # the reader itself: a lazy optional import, a top-level one, and a from-import of a file
    sample = PACKAGE_ROOT / "tinytorch" / "models" / "huggingface.py"
    found = dict(imports(sample))
    assert found["safetensors.numpy"] is False and found["tinytorch.models.transformer"] is True
    assert allowed_modules("tinytorch/core/layers.py") == {1, 3}


# tito's wings, top to bottom: a file may import its own wing and the wings below it, and the two
# leaf files every wing may use; nothing imports upwards, and there is no circle anywhere in tito
WINGS = ("cli", "grading", "student", "curriculum", "sandbox")
LEAVES = {"tito.errors", "tito.inert"}


def wing(dotted: str) -> str | None:
    """The wing of a tito module name (None for the leaves and tito itself)."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else None


def tito_module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE_ROOT).with_suffix("").parts).removesuffix(".__init__")


def upward_imports(path: Path, name: str) -> list[str]:
    """The imports of `path` (the tito module `name`) that leave its wing for one above it."""
    here = wing(name)
    allowed = set(WINGS[WINGS.index(here) :]) if here else set()
    found = []
    for dotted, _ in imports(path):
        if dotted.split(".")[0] != "tito" or dotted in LEAVES or dotted == "tito":
            continue
        if wing(dotted) not in allowed:
            found.append(f"{name} ({here}) imports {dotted} ({wing(dotted)})")
    return found


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph` (module -> modules it imports), or []."""
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, trail: list[str]) -> list[str]:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                return [*trail, node, nxt]
            if nxt not in seen and (found := visit(nxt, [*trail, node])):
                return found
        seen[node] = 2
        return []

    for node in sorted(graph):
        if node not in seen and (found := visit(node, [])):
            return found
    return []


TITO = [p for p in files("tito") if p.name != "__main__.py"]


@pytest.mark.parametrize("path", TITO, ids=rel)
def test_tito_imports_only_its_own_wing_and_the_wings_below(path):
    name = tito_module(path)
    assert wing(name) is not None or name in LEAVES | {"tito"}, f"{rel(path)} is in no wing"
    assert upward_imports(path, name) == []


def test_tito_has_no_import_circle():
    graph = {
        tito_module(p): {d for d, _ in imports(p) if d.startswith("tito.")} - {tito_module(p)}
        for p in TITO
    }
    assert circle(graph) == []


def test_the_wing_rules_see_an_upward_import_and_a_circle(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text("def f():\n    from tito.grading import scoring\n")
    assert upward_imports(sample, "tito.student.x") == [
        "tito.student.x (student) imports tito.grading.scoring (grading)"
    ]
    assert upward_imports(sample, "tito.cli.x") == []
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) == []
