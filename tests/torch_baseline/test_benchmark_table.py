"""The benchmark table fits the console: one line a row when wide, a few lines a row in 80."""

import io
import json
import re

import pytest
from rich.console import Console

from benchmarks import report
from tito.curriculum.paths import PACKAGE_ROOT

RESULTS = json.loads((PACKAGE_ROOT / "benchmarks" / "results.json").read_text())
QUALITY = {"steps": 2000, "val_loss": {"tinytorch": 1.5, "torch": 1.49}, "val_loss_gap": 0.01}


def rendered(width: int, results: dict) -> list[str]:
    console = Console(file=io.StringIO(), width=width)
    console.print(report.table(results, console.width))
    return console.file.getvalue().splitlines()


def quick(results: dict) -> dict:
    """The `--quick` run's shape: a few rows, every library at one thread (CPU ratios shown)."""
    rows = {k: results["rows"][k] for k in ("train_small", "train_small_own", "gen_small")}
    out = json.loads(json.dumps({**results, "rows": rows}))
    for row in out["rows"].values():
        for by in row["libraries"].values():
            for cell in by["best"].values():
                if cell.get("setting") != "own":
                    cell["setting"], cell["cpu"] = "1t", {"median": cell["median"]}
    return out


@pytest.mark.parametrize(
    "results",
    [RESULTS, {**RESULTS, "quality": QUALITY}, quick(RESULTS)],
    ids=["full", "quality", "quick"],
)
def test_in_80_columns_every_figure_is_whole_and_a_row_takes_at_most_three_lines(results):
    lines = rendered(80, results)
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines) and "…" not in text
    for row in report.rows(results):
        for figure in (row["tinytorch"], row["torch"]):
            median, spread, setting = figure.split(" ")
            assert f"{median} {setting}" in text and spread in text
        for word in row["status"].replace("goal ", "").split():  # "MUST MISSED" never cropped
            assert re.search(rf"\b{word}\b", text)
    body = [line for line in lines[4:] if line.strip()]  # after the title and the header
    rows = len(report.rows(results)) + ("quality" in results)
    assert len(body) <= 3 * rows


def test_a_wide_console_gets_one_line_a_row():
    lines = rendered(report.WIDE, RESULTS)
    for row in report.rows(RESULTS):
        assert sum(row["metric"] in line and row["tinytorch"] in line for line in lines) == 1
