"""Every graded check declares the solution cells it measures (`@graded(grades=...)`), and every
solution cell of every module is measured by at least one check: a slip in any cell costs some
check, and (tito/grading/scoring.py isolates each check) only the checks that declare it."""

from __future__ import annotations

import re

import nbformat
import pytest

from tinytorch.checks import Collect, graded
from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import MODULES
from tito.curriculum.program import (
    build_program,
    declared,
    describe_cells,
    is_demo,
    solution_functions,
    untouched,
)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_every_check_declares_cells_and_every_solution_cell_is_measured(module):
    source = notebooks.read_source(paths.source(module))
    solutions = [_meta(c)["grade_id"] for c in source.cells if _meta(c).get("solution")]
    measured: set[str] = set()
    for cell in source.cells:
        if _meta(cell).get("grade") and not _meta(cell).get("solution"):
            cells = declared(cell.source)
            assert cells, f"{module.name}: check '{_meta(cell)['grade_id']}' declares no cell"
            unknown = set(cells) - set(solutions)
            assert not unknown, f"{module.name}: '{_meta(cell)['grade_id']}' declares {unknown}"
            measured |= set(cells)
    assert set(solutions) - measured == set(), f"{module.name}: no check measures these cells"


def test_graded_keeps_the_declared_cells():
    Collect.probes = []
    try:

        @graded(grades="layernorm")
        def one(rng):
            return {"x": 1}

        @graded(grades=("mlp", "block"))
        def two(rng):
            return {"x": 1}

    finally:
        Collect.probes = None
    assert one.grades == ("layernorm",) and two.grades == ("mlp", "block")


def test_declared_reads_every_probe_of_a_cell_and_ignores_other_calls():
    code = (
        "@graded(rtol=1e-4, grades='a')\ndef p(rng): ...\n"
        "@graded(grades=('b', 'a'))\ndef q(rng): ...\nf(grades='z')\n"
    )
    assert declared(code) == ("a", "b")
    assert declared("@graded(rtol=0)\ndef p(rng): ...") == ()


def test_an_isolated_program_takes_the_reference_for_every_undeclared_cell():
    module = next(m for m in MODULES if m.number == 13)
    source = notebooks.read_source(paths.source(module))
    mine = nbformat.from_dict(source)
    for cell in mine.cells:
        if _meta(cell).get("solution"):
            cell.source = f"# mine: {_meta(cell)['grade_id']}\n"
    full = {label: code for label, code, _ in build_program(source, mine).cells}
    alone = {label: code for label, code, _ in build_program(source, mine, own=("mlp",)).cells}
    reference = {_meta(c).get("grade_id"): c.source for c in source.cells}
    assert full["layernorm"].startswith("# mine") and alone["layernorm"] == reference["layernorm"]
    assert alone["mlp"] == "# mine: mlp\n" and alone["gpt"] == reference["gpt"]


def test_a_cell_is_described_by_the_functions_its_solution_regions_stand_in():
    module = next(m for m in MODULES if m.number == 13)
    source = notebooks.read_source(paths.source(module))
    code = next(c.source for c in source.cells if _meta(c).get("grade_id") == "layernorm")
    assert solution_functions(code) == ["LayerNorm.forward"]
    assert describe_cells(source, ("layernorm",)) == "LayerNorm.forward (cell 'layernorm')"
    plain = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n\nY = 2\n"
    assert solution_functions(plain) == ["f"]


def test_a_cell_left_as_released_is_told_from_one_with_code_of_the_students():
    module = next(m for m in MODULES if m.number == 13)
    source = notebooks.read_source(paths.source(module))
    code = next(c.source for c in source.cells if _meta(c).get("grade_id") == "layernorm")
    tito_stub = notebooks.strip_solutions(code, module)
    nbgrader_stub = re.sub(r"# TODO: your code here.*", "# TODO: your code here", tito_stub)
    nbgrader_stub = re.sub(r"NotImplementedError\(.*\)", "NotImplementedError()", nbgrader_stub)
    assert nbgrader_stub != tito_stub
    assert untouched(tito_stub, code) and untouched(tito_stub + "\n\n", code)
    assert untouched(nbgrader_stub, code)
    assert not untouched(code, code)
    assert not untouched(tito_stub.replace("raise NotImplementedError", "return x  #"), code)


def _names(code: str, bound: bool) -> set[str]:
    import ast

    tree = ast.parse(code)
    if bound:
        found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Store)}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(node.name)
        return found
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_a_demo_cell_is_left_out_of_the_checks_and_defines_nothing_they_use(module):
    source = notebooks.read_source(paths.source(module))
    demos = [c for c in source.cells if is_demo(c)]
    program = build_program(source, source)
    kept = {code for _, code, _ in program.cells}
    checks = set().union(*(_names(code, bound=False) for _, _, code, _ in program.checks))
    bound = [_names(code, bound=True) for _, code, _ in program.cells]
    bound += [_names(code, bound=True) for _, _, code, _ in program.checks]
    checks -= set().union(*bound)  # what the checks take from a cell the program leaves out
    for demo in demos:
        assert demo.cell_type == "code" and not _meta(demo), "a demo cell is a plain code cell"
        assert demo.source not in kept, f"{module.name}: a demo cell is part of the program"
        assert not _names(demo.source, bound=True) & checks, module.name


def test_the_course_tags_its_costly_demos():
    # timings, tours and plots take seconds of every check's run (and need what the sandbox lacks)
    costly = (
        (14, "tour()"),
        (15, "best_of(fn"),
        (17, "seconds_per_token("),
        (18, "step_ms(parts)"),
    )
    for number, text in costly:
        source = notebooks.read_source(paths.source(MODULES[number - 1]))
        cell = next(c for c in source.cells if text in c.source and c.cell_type == "code")
        assert cell.metadata.get("tags") == ["demo"], number
        assert all(cell.source != code for _, code, _ in build_program(source, source).cells)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_the_graders_refusals_let_every_reference_solution_cell_run(module):
    """A reference cell the grader would refuse (a `setattr`, a `getattr` of a name not written
    out) costs every submission that cell's checks, the reference's own included."""
    source = notebooks.read_source(paths.source(module))
    program = build_program(source, source)
    assert program.refusals == {}, program.refusals
