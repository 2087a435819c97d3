"""What the historical milestones (perceptron, xor, mlp, cnn) share: the header that tells the
story and says whose code runs, the files of a run, and the table of results.

Each runs as soon as the student has the modules it needs. The perceptron needs only modules
01-03, before module 07's `write_atomic` exists, so the files are written here by the same rule:
a temporary file in the same folder, permissions from the umask, one rename. Nothing in this file
imports tinytorch.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.panel import Panel
from rich.table import Table

from milestones.folder import prepare_out
from milestones.registry import Milestone, RunOptions

__all__ = ["code_line", "figure", "header", "prepare_out", "results", "save_figure", "write_json"]


def code_line(requires: tuple[int, ...], completed: frozenset[int]) -> str:
    """e.g. "code: your modules 01 02; reference module 03" for the modules a run imports."""
    parts = []
    for label, numbers in (
        ("your", [n for n in requires if n in completed]),
        ("reference", [n for n in requires if n not in completed]),
    ):
        if numbers:
            noun = "module" if len(numbers) == 1 else "modules"
            parts.append(f"{label} {noun} " + " ".join(f"{n:02d}" for n in numbers))
    return "code: " + "; ".join(parts)


def header(milestone: Milestone, opts: RunOptions, title: str, story: str) -> None:
    """The year, the story of the result being reproduced, and whose code is about to run."""
    body = f"{story}\n\n[dim]{code_line(milestone.requires, opts.completed)}[/dim]"
    panel = Panel(body, title=f"{milestone.year}: {title}", expand=False, width=88)
    opts.console.print(panel, soft_wrap=False)  # tito's console soft-wraps: the panel wraps itself


def _write(path: Path, write) -> Path:
    """The package's one atomic writer (a given file, there from the first module on)."""
    from tinytorch.core.checkpoint import write_atomic

    return write_atomic(path, write)


def write_json(path: Path, payload: dict) -> Path:
    text = json.dumps(payload, indent=2) + "\n"
    return _write(path, lambda handle: handle.write(text.encode("utf-8")))


def figure(*args, **kwargs):
    """A matplotlib figure and axes on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    if fig.get_layout_engine() is None:
        fig.tight_layout()
    _write(path, lambda handle: fig.savefig(handle, format="png", dpi=110))
    plt.close(fig)
    return path


def results(opts: RunOptions, title: str, rows: list[tuple[str, ...]], columns: tuple[str, ...]):
    """Print the run's figures as one table."""
    table = Table(title=title)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    opts.console.print(table)
