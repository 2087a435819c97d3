"""docs/DESIGN.md's "Things that exist once" table holds: every name a row gives is defined in
the file the row names and nowhere else in the project's code (a name search of the syntax
trees: a top-level def, class or assignment). A module source and the package file it exports
count as one place."""

import ast
import re
from pathlib import Path

import pytest

from tito.curriculum.catalog import MODULES
from tito.curriculum.paths import PACKAGE_ROOT

DESIGN = PACKAGE_ROOT / "docs" / "DESIGN.md"
CODE = ("tinytorch", "tito", "milestones", "benchmarks", "modules")
EXPORTS = {p.as_posix() for m in MODULES for p in m.package_files()}  # copies of modules/


def table_rows() -> list[tuple[str, list[str], str]]:
    """(what, names, file) for each row that names definitions: "`a`, `b` in `path`"."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("## Things that exist once", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or " in `" not in cells[1]:
            continue
        names_part, _, where = cells[1].partition(" in `")
        names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", names_part)
        rows.append((cells[0], names, where.split("`")[0]))
    return rows


def definitions(path: Path) -> set[str]:
    """Names defined at the top level of a file or of its classes' bodies (methods excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return found


def defined_in(name: str) -> list[str]:
    """Every project file that defines `name` (exported package files left out)."""
    found = []
    for folder in CODE:
        for path in sorted((PACKAGE_ROOT / folder).rglob("*.py")):
            rel = path.relative_to(PACKAGE_ROOT).as_posix()
            if rel not in EXPORTS and name in definitions(path):
                found.append(rel)
    return found


ROWS = table_rows()


def test_the_table_is_read():
    assert len(ROWS) >= 8 and all(names for _, names, _ in ROWS)


# a name may have one row per side (the atomic writer of the package and of the CLI): its
# definitions are then exactly the places its rows name
PLACES: dict[str, set[str]] = {}
for _, names, where in ROWS:
    for name in names:
        PLACES.setdefault(name, set()).add(where)


@pytest.mark.parametrize("what,names,where", ROWS, ids=[r[0][:40] for r in ROWS])
def test_each_shared_fact_is_defined_once_where_the_table_says(what, names, where):
    for name in names:
        assert set(defined_in(name)) == PLACES[name], f"{what}: {name}"
        assert len(defined_in(name)) == len(PLACES[name]), f"{what}: {name} twice in a file set"


def test_a_second_definition_is_found(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text("class Box:\n    pass\n\nLIMIT: int = 3\nTABLE = {}\n\ndef f():\n    pass\n")
    assert definitions(sample) == {"Box", "LIMIT", "TABLE", "f"}
