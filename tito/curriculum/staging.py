"""One way to stage a package: a fresh tinytorch/ holding the package's __init__ files, the given
files, and the code of the modules a module requires (the reference's, or the student's as their
package holds it), nothing later in the course. Used by grading, a diagnosis and `complete`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tito.curriculum import exporter, notebooks, paths
from tito.curriculum.catalog import GIVEN_REQUIRES, CourseModule, closure


def reference_files(module: CourseModule) -> dict[Path, str]:
    """The package files `module`'s reference solution exports, by path under tinytorch/."""
    nb = notebooks.read_source(paths.source(module))
    return exporter.render(nb, module, origin=module.source.as_posix())


def copy_package(source: Path, target: Path) -> None:
    """Copy tinytorch/ for staging: contents only, so a read-only original stays writable here."""
    for path in sorted([*source.rglob("*.py"), source / exporter.COURSE_MAP]):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)


def _stage_skeleton(module: CourseModule, into: Path) -> Path:
    """tinytorch/ under `into` with the package's __init__ files and the given files that build
    on nothing later than `module` (a given file of module 18's is of no use to module 06's
    checks, and would only show them code)."""
    package = into / "tinytorch"
    source = paths.root() / "tinytorch"
    allowed = {m.number for m in closure(module)} | {module.number}
    given = [
        source.parent / name for name, needs in GIVEN_REQUIRES.items() if set(needs) <= allowed
    ]
    for path in [*source.rglob("__init__.py"), source / exporter.COURSE_MAP, *given]:
        if path.is_file():
            target = package / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return package


def stage_reference(module: CourseModule, into: Path) -> Path:
    """The skeleton and the reference export of the modules `module` requires. Returns the
    package folder."""
    package = _stage_skeleton(module, into)
    for required in closure(module):
        exporter.write(reference_files(required), package)
    return package


def stage_own(module: CourseModule, into: Path) -> Path:
    """The skeleton and the modules `module` requires as the student's package holds them (their
    completed code, or the reference where they have not completed one)."""
    package = _stage_skeleton(module, into)
    for required in closure(module):
        for rel in required.package_files():
            path = paths.root() / rel
            if path.is_file():
                target = into / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    return package
