"""Map a line of an exported package file back to the notebook cell the student wrote it in.

Errors in a student's code happen in the staged copy of the package, a temporary folder the
student never sees; this turns "…/tinytorch/core/tensor.py, line 105" into
"tensor.ipynb, cell 7, line 3: return a - b".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from tito.curriculum import exporter
from tito.curriculum.notebooks import directives


@dataclass(frozen=True)
class Place:
    notebook: str  # the notebook's file name, e.g. tensor.ipynb
    cell: int  # 1-based, counting every cell as the notebook editor lists them
    line: int  # 1-based within the cell
    text: str

    def __str__(self) -> str:
        return f"{self.notebook}, cell {self.cell}, line {self.line}: {self.text.strip()}"


class SourceMap:
    """Line numbers of rendered package files (paths under tinytorch/) -> notebook places."""

    def __init__(self, notebook: nbformat.NotebookNode, files: dict[Path, str], name: str):
        self.files = files
        self._places: dict[Path, dict[int, Place]] = {rel: {} for rel in files}
        cursor = dict.fromkeys(files, 0)
        default = None
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            targets = []
            for directive, arg in directives(cell.source):
                if directive == "default_exp":
                    default = arg
                elif directive == "export" and (arg or default):
                    targets.append(arg or default)
            for dotted in targets:
                rel = Path(*dotted.split(".")).with_suffix(".py")
                if rel in files:
                    self._place_cell(rel, cell.source, index + 1, name, cursor)

    def _place_cell(self, rel: Path, source: str, cell: int, name: str, cursor: dict) -> None:
        cleaned = exporter._clean(source)
        text = self.files[rel]
        at = text.find(cleaned, cursor[rel]) if cleaned else -1
        if at < 0:
            return
        cursor[rel] = at + len(cleaned)
        first = text.count("\n", 0, at) + 1
        kept = cleaned.splitlines()
        # The export drops directive and marker lines and trims blank edges; every kept line
        # appears in order among the cell's lines, so a greedy walk pairs them up.
        j = 0
        for number, line in enumerate(source.splitlines(), start=1):
            if j < len(kept) and line.rstrip() == kept[j]:
                self._places[rel][first + j] = Place(name, cell, number, line)
                j += 1

    def place(self, rel: Path, lineno: int) -> Place | None:
        return self._places.get(rel, {}).get(lineno)

    def syntax_error(self) -> tuple[Place | str, SyntaxError] | None:
        """The first syntax error in the rendered files, where the student wrote it."""
        for rel, text in self.files.items():
            try:
                compile(text, f"tinytorch/{rel.as_posix()}", "exec")
            except SyntaxError as err:
                where = self.place(rel, err.lineno or 0)
                return where or f"tinytorch/{rel.as_posix()}, line {err.lineno}", err
        return None
