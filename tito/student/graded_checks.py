"""A pytest plugin that runs a module's graded checks as tests, in `tito module complete`.

The instructor grades the notebook's check cells, not the module's tests: code that passes every
test yet fails its check cell must not be installed as complete. tito writes the check program
(tito/curriculum/program.py: the lesson's cells in order, with the student's solution cells)
to the file named by TITO_CHECKS; this plugin adds one test per check cell, named
`<notebook>::<grade id>`, that runs as a notebook would from a fresh start: every cell before the
check, then the check (a probe runs at once on the notebook's seed, asserting what it asserts).

A failure carries where it happened in the student's notebook (`tito_places`, innermost first)
and what the check measures (`tito_note`); tito.student.pytest_events reports both.
"""

from __future__ import annotations

import json
import os
import traceback

import pytest

from tito.sandbox.cells import Compiler, describe
from tito.student.runner import CHECKS_ENV
from tito.student.sourcemap import Place

KEYWORD = "graded"  # `-k graded` selects the checks alone


class CheckItem(pytest.Item):
    def __init__(self, *, job: dict, check: dict, **kwargs):
        super().__init__(**kwargs)
        self.job, self.check = job, check
        self.extra_keyword_matches.add(KEYWORD)

    def runtest(self) -> None:
        """The cells before the check, then the check, as grading runs them: a cell that raises
        is passed over (the check may still pass); the check's own outcome decides."""
        job, check = self.job, self.check
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        compile_cell = Compiler()
        earlier = ""  # the first of the student's answer cells that raised
        for label, code, index in job["cells"]:
            if index > check["index"]:
                break
            try:
                exec(compile_cell(code, label), namespace)
            except Exception as err:
                cell = job["cells_at"].get(label)
                if label in job["answers"] and cell and not earlier:
                    earlier = f"before it, your cell {cell} raised {describe(err)}"
        try:
            exec(compile_cell(check["code"], check["label"]), namespace)
        except Exception as err:
            raise self._mark(err, earlier) from None

    def _mark(self, err: BaseException, earlier: str) -> BaseException:
        """Attach the notebook places `err` went through and what the check grades."""
        try:
            err.tito_places = self._places(err)
            measures = self.check.get("measures")
            note = f"your notebook's graded check {self.check['label']}"
            note += f", which grades {measures}" if measures else ""
            err.tito_note = note + (f"\n{earlier}" if earlier else "")
        except AttributeError:  # an exception class that takes no attributes
            pass
        return err

    def _places(self, err: BaseException) -> list[str]:
        """'notebook, cell N, line M: code' for each cell the traceback passed, innermost first."""
        codes = {label: code for label, code, _ in self.job["cells"]}
        codes[self.check["label"]] = self.check["code"]
        found, seen = [], set()
        for frame in reversed(traceback.extract_tb(err.__traceback__)):
            name = frame.filename
            if not (name.startswith("<cell ") and name.endswith(">")):
                continue
            label = name[len("<cell ") : -1]
            cell = self.job["cells_at"].get(label)
            lines = codes.get(label, "").splitlines()
            if cell is None or cell in seen or not 0 < (frame.lineno or 0) <= len(lines):
                continue  # a cell's innermost line only (not the decorator that called it)
            seen.add(cell)
            text = lines[frame.lineno - 1]
            found.append(str(Place(self.job["notebook"], cell, frame.lineno, text)))
        return found[:3]

    def repr_failure(self, excinfo, style=None):
        return f"{excinfo.typename}: {describe(excinfo.value)}"

    def reportinfo(self):
        return self.path, None, f"graded check {self.check['label']}"


@pytest.hookimpl(tryfirst=True)  # before `-k` and `-m` select: the checks are tests like others
def pytest_collection_modifyitems(session, config, items) -> None:
    path = os.environ.get(CHECKS_ENV)
    if not path:
        return
    with open(path, encoding="utf-8") as handle:
        job = json.load(handle)
    for check in job["checks"]:
        items.append(
            CheckItem.from_parent(
                session,
                name=check["label"],
                nodeid=f"{job['notebook']}::{check['label']}",
                job=job,
                check=check,
            )
        )
