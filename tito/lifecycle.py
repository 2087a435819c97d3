"""The student lifecycle of a module: open, complete, export, reset, status."""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime
from pathlib import Path

import nbformat

from tito import catalog, exporter, notebooks, paths, progress
from tito.catalog import CourseModule
from tito.errors import TitoError
from tito.runner import TestRun, run_tests

STATES = ("not started", "in progress", "complete")


def state(module: CourseModule, done: dict | None = None) -> str:
    done = progress.load() if done is None else done
    if module.number in done:
        return "complete"
    return "in progress" if paths.notebook(module).exists() else "not started"


def open_module(module: CourseModule) -> tuple[Path, bool]:
    """Create the student's notebook unless one exists; returns (path, created)."""
    target = paths.notebook(module)
    if target.exists():
        return target, False
    nb = notebooks.student_notebook(module, paths.source(module))
    _write_notebook(nb, target)
    return target, True


def _write_notebook(nb: nbformat.NotebookNode, target: Path) -> None:
    paths.write_atomic(target, nbformat.writes(nb) + "\n")


def reference_files(module: CourseModule) -> dict[Path, str]:
    nb = notebooks.read_source(paths.source(module))
    return exporter.render(nb, module, origin=module.source.as_posix())


def export_reference(module: CourseModule) -> list[Path]:
    return exporter.write(reference_files(module), paths.root() / "tinytorch")


def check_reference(module: CourseModule) -> list[str]:
    return exporter.drift(reference_files(module), paths.root() / "tinytorch")


def missing_prerequisites(module: CourseModule) -> list[CourseModule]:
    return catalog.missing(module.requires, paths.root())


def complete(module: CourseModule) -> tuple[TestRun, bool]:
    """Export the student's notebook into a staged copy of the package, test it, then install it.

    Returns the test run and whether progress was recorded. The package in the project only
    changes when the student's code passes, so a failing attempt never breaks later modules.
    """
    nb_path = paths.notebook(module)
    if not nb_path.exists():
        raise TitoError(
            f"module {module.name} has no working notebook yet",
            hint=f"run `tito module open {module.number}` and fill in the TODOs first",
        )
    missing = missing_prerequisites(module)
    if missing:
        names = ", ".join(f"{m.number:02d} {m.slug}" for m in missing)
        raise TitoError(
            f"module {module.name} needs {names}, which the tinytorch package does not have",
            hint=f"complete or export it first: `tito module export {missing[0].number}`",
        )
    nb = notebooks.read_notebook(nb_path)
    origin = nb_path.relative_to(paths.root()).as_posix()
    files = exporter.render(nb, module, origin=origin)
    with tempfile.TemporaryDirectory(prefix="tito-stage-") as stage:
        staged = Path(stage) / "tinytorch"
        shutil.copytree(
            paths.root() / "tinytorch", staged, ignore=shutil.ignore_patterns("__pycache__")
        )
        exporter.write(files, staged)
        run = run_tests(module, package_parent=Path(stage))
    if not run.ok:
        return run, False
    exporter.write(files, paths.root() / "tinytorch")
    progress.record(module.number, run.passed, run.failed)
    return run, True


def reset(module: CourseModule) -> Path | None:
    """Back the student's notebook up, then restore the fresh notebook and the reference export."""
    target = paths.notebook(module)
    backup = None
    if target.exists():
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        backup = target.parent / "backups" / f"{module.slug}-{stamp}.ipynb"
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(target, backup)
        target.unlink()
    open_module(module)
    export_reference(module)
    progress.forget(module.number)
    return backup
