"""No staged file holds a line of the graded module's own solutions: the package a submission
of module N is graded over (the reference of the modules N requires, the __init__ files and the
given files) shares no meaningful line with module N's solution regions, so no solution can be
read from the stage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tito.curriculum import notebooks, paths, staging
from tito.curriculum.catalog import MODULES, closure

MEANINGFUL = 20  # characters: shorter lines (`return x`, `x = self.ln1(x)`) say nothing alone


def normalised(line: str) -> str:
    """A line as code: no comment after it, runs of white space as one space."""
    line = re.sub(r"\s+#.*$", "", line.strip())
    return " ".join(line.split())


def solution_lines(module) -> set[str]:
    secret = notebooks.secret_lines(notebooks.read_source(paths.source(module)))
    found = {normalised(line) for line in secret}
    return {line for line in found if len(line) >= MEANINGFUL and not line.startswith("#")}


def course_lines(module) -> set[str]:
    """Lines of the reference exports staged by design (the modules `module` requires): the
    course's earlier material, which a line of module N may repeat without giving it away."""
    return {
        normalised(line)
        for required in closure(module)
        for text in staging.reference_files(required).values()
        for line in text.splitlines()
    }


def staged_lines(folder: Path) -> dict[str, set[str]]:
    return {
        str(path.relative_to(folder)): {normalised(x) for x in path.read_text().splitlines()}
        for path in sorted(folder.rglob("*.py"))
    }


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_no_staged_file_holds_a_line_of_the_modules_solutions(module, tmp_path):
    staging.stage_reference(module, tmp_path)
    secret = solution_lines(module) - course_lines(module)
    assert secret, module.name  # the test would pass without looking
    leaks = {
        rel: sorted(lines & secret)
        for rel, lines in staged_lines(tmp_path).items()
        if lines & secret
    }
    assert not leaks, leaks
