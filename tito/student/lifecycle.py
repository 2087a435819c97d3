"""The student lifecycle of a module: open, complete, export, reset, status."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import nbformat

from tito.curriculum import catalog, exporter, notebooks, paths, program, refusals, staging
from tito.curriculum.catalog import CourseModule
from tito.errors import TitoError
from tito.student import package_files, progress
from tito.student.package_files import Backup
from tito.student.runner import TestRun, run_tests
from tito.student.sourcemap import SourceMap

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


def export_reference(
    modules: list[CourseModule], force: bool = False
) -> tuple[list[Path], list[Backup]]:
    """Write the reference code of `modules` into tinytorch/, all or nothing; returns the files
    written and the backups made of package files edited by hand.

    A completed module's package code is the student's own: it is replaced (and its completion
    forgotten, so status never claims it) only with `force`.
    """
    done = progress.load()
    kept = [m for m in modules if m.number in done]
    if kept and not force:
        names = ", ".join(f"{m.number:02d} {m.slug}" for m in kept)
        first = kept[0].number
        raise TitoError(
            f"tinytorch/ holds your own completed code for {names}; export would replace it "
            "with the reference",
            hint=f"keep it (nothing to do), or `tito module export {first} --force` to replace "
            f"it and mark the module not complete, or `tito module reset {first}`",
        )
    package = paths.root() / "tinytorch"
    writes = {
        package / rel: text for m in modules for rel, text in staging.reference_files(m).items()
    }
    writes[package / exporter.COURSE_MAP] = exporter.course_map()
    writes = {path: text for path, text in writes.items() if not _holds(path, text)}
    written = list(writes)
    saved = package_files.protect(writes)
    if kept:
        forgotten = progress.without(*(m.number for m in kept))
        if forgotten is not None:
            writes[progress.file()] = forgotten
    paths.write_all(writes)
    return written, saved


def _holds(path: Path, text: str) -> bool:
    """The file already holds exactly `text` (so writing it again would change nothing)."""
    return path.is_file() and path.read_text(encoding="utf-8") == text


def check_course_map() -> list[str]:
    """Drift of tinytorch/course.json from the module table."""
    path = paths.root() / "tinytorch" / exporter.COURSE_MAP
    found = path.read_text(encoding="utf-8") if path.is_file() else None
    return (
        [] if found == exporter.course_map() else [f"{paths.shown(path)} is not the module table's"]
    )


def check_reference(module: CourseModule, done: dict | None = None) -> list[str]:
    """Drift of tinytorch/ from what it should hold for `module`: for a completed module the
    student's recorded export, otherwise the reference in modules/."""
    done = progress.load() if done is None else done
    record = done.get(module.number)
    package = paths.root() / "tinytorch"
    if record is not None and not record.files:  # recorded before tito kept hashes
        mine = paths.notebook(module).relative_to(paths.root()).as_posix()
        if all(_origin(package / rel) == mine for rel in staging.reference_files(module)):
            return []
    if record is None or not record.files:
        return exporter.drift(staging.reference_files(module), package)
    diffs = []
    for rel, expected in record.files.items():
        target = paths.root() / "tinytorch" / rel
        found = progress.digest(target.read_text(encoding="utf-8")) if target.exists() else None
        if found != expected:
            diffs.append(
                f"tinytorch/{rel} changed since you completed module {module.name} "
                f"(it no longer holds the code `complete` installed)"
            )
    return diffs


def _origin(path: Path) -> str | None:
    """The source a package file says it was generated from (None if absent or unmarked)."""
    return exporter.origin_of(path.read_text(encoding="utf-8")) if path.exists() else None


def installed_map(module: CourseModule):
    """For `tito test`: map package lines to the student's notebook cells when the package holds
    exactly what that notebook exports (a completed module); otherwise None."""
    nb_path = paths.notebook(module)
    if not nb_path.exists():
        return None
    try:
        nb = notebooks.read_notebook(nb_path, module)
        files = exporter.render(nb, module, origin=nb_path.relative_to(paths.root()).as_posix())
    except TitoError:
        return None
    package = paths.root() / "tinytorch"
    for rel, text in files.items():
        target = package / rel
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            return None
    return SourceMap(nb, files, nb_path.name).place


def edited_since_complete(module: CourseModule) -> str:
    """For `tito test`: one line when the student's notebook now exports other code than their
    last `complete` installed (the tests run the package, not the notebook); "" otherwise."""
    record = progress.load().get(module.number)
    nb_path = paths.notebook(module)
    if record is None or not record.files or not nb_path.exists():
        return ""
    try:
        nb = notebooks.read_notebook(nb_path, module)
        files = exporter.render(nb, module, origin=nb_path.relative_to(paths.root()).as_posix())
    except TitoError:
        return ""
    if {rel.as_posix(): progress.digest(text) for rel, text in files.items()} == record.files:
        return ""
    return (
        f"{paths.shown(nb_path)} changed since you completed module {module.number}: these tests "
        f"run the code that `complete` installed, not your newer edits; `tito module complete "
        f"{module.number}` tests and installs them"
    )


def student_code_at(tb) -> tuple[CourseModule, str] | None:
    """(module, "notebook, cell, line: code") of the deepest frame of traceback `tb` that ran a
    line the student wrote: a package file their completed notebook exported; else None."""
    import traceback

    package = (paths.root() / "tinytorch").resolve()
    owners = {p.as_posix(): m for m in catalog.MODULES for p in m.package_files()}
    completed = progress.load()
    for frame, lineno in reversed(list(traceback.walk_tb(tb))):
        try:
            rel = Path(frame.f_code.co_filename).resolve().relative_to(package)
        except ValueError:
            continue
        module = owners.get(f"tinytorch/{rel.as_posix()}")
        if module is None or module.number not in completed:
            continue
        place = installed_map(module)
        where = place(rel, lineno) if place is not None else None
        if where is not None:
            return module, str(where)
    return None


def missing_prerequisites(module: CourseModule) -> list[CourseModule]:
    return catalog.missing(module.requires, paths.root())


def _check_writable(targets: list[Path]) -> None:
    """Fail before any work when a file tito must write cannot be written (named, real path)."""
    for path in targets:
        folder = path.parent
        while not folder.exists():
            folder = folder.parent
        blocked = folder if not os.access(folder, os.W_OK | os.X_OK) else None
        if blocked is None and path.exists() and not os.access(path, os.W_OK):
            blocked = path
        if blocked is not None:
            raise TitoError(
                f"cannot write {path}: {blocked} is read-only; nothing was changed",
                hint=f"make it writable (chmod u+w {blocked}) and run the command again",
            )


def complete(
    module: CourseModule, timeout: float | None = None, on_event=None
) -> tuple[TestRun, bool, list[Path]]:
    """Export the student's notebook into a staged copy of the package, test it, then install it.

    Returns the test run, whether progress was recorded, and the backups made of package files
    someone had edited by hand (`package_files.protect`). The package in the project only
    changes when the student's code passes, and then together with the progress file, so a
    failing or interrupted attempt never breaks later modules or leaves half a change.
    """
    nb_path = paths.notebook(module)
    if not nb_path.exists():
        others = sorted(nb_path.parent.glob("*.ipynb")) if nb_path.parent.exists() else []
        if others:
            raise TitoError(
                f"complete reads {paths.shown(nb_path)}, which does not exist; "
                f"found {', '.join(p.name for p in others)} beside it",
                hint=f"rename the notebook you worked in to {nb_path.name}",
            )
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
    nb = notebooks.read_notebook(nb_path, module)
    origin = nb_path.relative_to(paths.root()).as_posix()
    files = exporter.render(nb, module, origin=origin)
    source_map = SourceMap(nb, files, nb_path.name)
    broken = source_map.syntax_error()
    if broken is not None:
        where, err = broken
        raise TitoError(
            f"SyntaxError in {where}: {err.msg}",
            hint=f"fix that line in {origin} and run `tito module complete {module.number}` again",
        )
    package = paths.root() / "tinytorch"
    _check_writable(
        [package / rel for rel in files] + [progress.file(), package_files.record_file()]
    )
    with tempfile.TemporaryDirectory(prefix="tito-stage-") as stage:
        staged = Path(stage) / "tinytorch"
        staging.copy_package(package, staged)
        exporter.write(files, staged)
        checks = Path(stage) / "checks.json"
        checks.write_text(json.dumps(check_job(module, nb, nb_path.name)), encoding="utf-8")
        run = run_tests(
            module,
            package_parent=Path(stage),
            locate=source_map.place,
            timeout=timeout,
            on_event=on_event,
            checks=checks,
        )
    if not run.ok:
        for failure in run.failures:
            failure.message += missing_name_hint(nb, failure.message)
        return run, False, []
    writes = {package / rel: text for rel, text in files.items()}
    reference = {package / rel: text for rel, text in staging.reference_files(module).items()}
    saved = package_files.protect(writes, known=reference)
    writes[progress.file()] = progress.with_record(module.number, run.passed, run.failed, files)
    paths.write_all(writes)
    return run, True, saved


def check_job(module: CourseModule, nb: nbformat.NotebookNode, name: str) -> dict:
    """The module's graded checks over the student's notebook `nb` (named `name`), as
    tito/student/graded_checks.py runs them: the program grading builds, each cell's label with
    its number in the student's notebook, and what each check measures."""
    source = notebooks.read_source(paths.source(module))
    built = program.build_program(source, nb)
    cells_at: dict[str, int] = {}
    for label, code, _ in [*built.cells, *((c[0], c[2], c[3]) for c in built.checks)]:
        for number, cell in enumerate(nb.cells, start=1):
            grade_id = notebooks.nbgrader_meta(cell).get("grade_id")
            if grade_id == label or (grade_id is None and cell.source == code):
                cells_at[label] = number
                break
    checks = [
        {"label": label, "code": code, "index": index,
         "measures": program.describe_cells(source, program.declared(code))}
        for label, _, code, index in built.checks
    ]  # fmt: skip
    answers = list(program.solution_codes(source))
    return {"notebook": name, "cells": built.cells, "checks": checks, "cells_at": cells_at,
            "answers": answers}  # fmt: skip


NAME_ERROR = re.compile(r"NameError: name '(\w+)' is not defined")


def missing_name_hint(nb: nbformat.NotebookNode, message: str) -> str:
    """For a NameError whose name the student's notebook defines in a cell the package or the
    grader does not get (no `#| export`, or not an answer cell): a line saying where it is and
    what to do, after a newline; "" otherwise."""
    match = NAME_ERROR.search(message)
    if match is None:
        return ""
    name, defined, used = match.group(1), None, None
    for number, cell in enumerate(nb.cells, start=1):
        if cell.cell_type != "code":
            continue
        try:
            tree = notebooks.parse_python(cell.source)
        except SyntaxError:
            continue
        answer = bool(notebooks.nbgrader_meta(cell).get("solution"))
        exported = any(d == "export" for d, _ in notebooks.directives(cell.source))
        if name in refusals.bound_names(tree):
            if answer and exported:
                return ""  # the package and the grader both get it: some other cause
            defined = defined or (number, exported, answer)
        elif (
            answer
            and used is None
            and name in {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        ):
            used = number
    if defined is None:
        return ""
    number, exported, answer = defined
    into = f"cell {used}, the answer cell that uses it" if used else "the answer cell that uses it"
    if not exported:
        added = "" if answer else " (a cell you add is neither exported nor graded)"
        return (
            f"\n`{name}` is defined in cell {number} of your notebook, which has no `#| export` "
            f"line, so the package does not get it: move it into {into}{added}"
        )
    return (
        f"\n`{name}` is defined in cell {number} of your notebook, which the grader does not run "
        f"(it runs the lesson's cells and your answer cells only): move it into {into}"
    )


def reset(module: CourseModule) -> tuple[Path | None, list[Backup]]:
    """Back the student's notebook up, then restore the fresh notebook and the reference export
    (and forget the completion) in one all-or-nothing write; returns the notebook's backup and
    those of package files edited by hand."""
    target = paths.notebook(module)
    fresh = notebooks.student_notebook(module, paths.source(module))
    package = paths.root() / "tinytorch"
    writes = {target: nbformat.writes(fresh) + "\n"}
    writes.update({package / rel: text for rel, text in staging.reference_files(module).items()})
    forgotten = progress.without(module.number)
    if forgotten is not None:
        writes[progress.file()] = forgotten
    _check_writable([*writes, package_files.record_file()])
    saved = package_files.protect(writes)
    backup = None
    if target.exists():
        backup = target.parent / "backups" / f"{module.slug}-{package_files.stamp()}.ipynb"
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(target, backup)
    paths.write_all(writes)
    return backup, saved
