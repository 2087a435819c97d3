"""The module table is the single source of truth; everything it names exists."""

import ast
import re
from pathlib import Path

import pytest

from tito.curriculum import exporter, notebooks
from tito.curriculum.catalog import MODULES, find
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


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_tests_import_only_earlier_modules(module):
    earlier = {m.number for m in MODULES if m.number <= module.number}
    homes = {dotted: m.number for m in MODULES for dotted in m.exports}
    for test_file in (PACKAGE_ROOT / module.tests).glob("*.py"):
        for dotted in re.findall(r"(?:from|import)\s+tinytorch\.([\w.]+)", test_file.read_text()):
            owner = homes.get(dotted)
            assert owner is None or owner in earlier, f"{test_file.name} imports {dotted}"


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
