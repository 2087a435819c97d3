"""tito olympics: module 20's contest, measured by the tool (milestones/olympics.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tito.cli.console import console, ok, safe
from tito.curriculum import catalog, paths
from tito.errors import TitoError

app = typer.Typer(
    help="The Torch Olympics (module 20): your GPT measured under the contest's rules.",
    no_args_is_help=True,
)

EVENT_NAMES = ("speed", "size", "quality", "all-around")
NEEDS = (1, 5, 10, 13, 19, 20)  # the run reader, the tokenizer, the GPT, the harness, the rules


def results_file() -> Path:
    return paths.root() / "runs" / "olympics" / "results.json"


def read_results() -> list:
    path = results_file()
    if not path.is_file():
        return []
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise TitoError(
            f"{path} is damaged (not JSON)",
            hint="move it away; `tito olympics run` starts a new one",
        ) from None
    return records if isinstance(records, list) else []


def _needs() -> None:
    missing = catalog.missing(NEEDS, paths.root())
    if missing:
        raise TitoError(
            "the olympics need modules your package does not have yet: "
            + ", ".join(m.name for m in missing),
            hint=f"complete them first, e.g. `tito module complete {missing[0].number}`",
        )


@app.command()
def run(
    event: Annotated[str, typer.Argument(help="speed, size, quality or all-around.")],
    run_folder: Annotated[
        Path,
        typer.Option(
            "--run", help="A trained run folder holding checkpoint.npz (and olympics.json)."
        ),
    ] = Path("runs/gpt"),
    repeats: Annotated[int, typer.Option(min=1, help="Timed generations per measurement.")] = 5,
    budget: Annotated[
        float, typer.Option(min=1, help="quality: CPU-seconds of training for each model.")
    ] = 60.0,
    allow_partial: Annotated[
        bool,
        typer.Option("--allow-partial", help="Measure a run that stopped before its last step."),
    ] = False,
) -> None:
    """Measure a run against its own untransformed baseline in EVENT and record the result.

    The run folder's olympics.json names you and the transformations to apply: accelerate
    (module 18), quantize:int8-per-channel (15), prune-structure:0.5 or lowrank:0.5 (16). Nothing
    else in it counts: the tool measures speed, size and held-out bits/char itself. For quality, its
    "train" entry ({"config": "tiny", "lr": 0.003, "batch_size": 16, "seed": 0}) says how the
    tool trains your model, and the baseline with the defaults, each for --budget CPU-seconds.
    A run that learned the held-out text (its score rises by more than 0.04 bits/char when the
    text's sentences are shuffled) scores 0.
    """
    from milestones import MilestoneError
    from milestones import olympics as contest
    from milestones.runs import require_finished

    if event not in EVENT_NAMES:
        raise TitoError(f"no event '{event}'", hint=f"choose one of: {', '.join(EVENT_NAMES)}")
    _needs()
    try:
        if event != "quality":  # quality trains its own models; the others measure this run
            require_finished(run_folder, allow_partial)
        record = contest.run_event(event, run_folder, paths.root() / "data", repeats, budget)
    except MilestoneError as err:
        raise TitoError(err.message, hint=err.hint) from None
    records = [*read_results(), record]
    paths.write_atomic(results_file(), json.dumps(records, indent=1))
    m, b = record["measured"], record["baseline"]
    console.print(
        f"{escape(record['name'])} in {event}: {m['tokens_per_second']:,.0f} tok/s, "
        f"{m['bytes']:,} bytes, {m['bits_per_char']:.3f} bits/char held out "
        f"(baseline {b['tokens_per_second']:,.0f} tok/s, {b['bytes']:,} bytes, "
        f"{b['bits_per_char']:.3f} bits/char)"
    )
    if record["violation"]:
        console.print(f"[bad]scores 0:[/bad] {escape(record['violation'])}")
    ok(f"score {record['score']:.3f}, recorded in {results_file()}")


@app.command()
def leaderboard() -> None:
    """The recorded results, best first in each event (one line per entrant)."""
    from milestones import olympics as contest

    records = read_results()
    board = contest.leaderboard(records)
    skipped = len(records) - sum(map(contest.valid, records))
    if not board:
        console.print("no results yet: run `tito olympics run speed --run runs/gpt`")
    for event, rows in board.items():
        table = Table(title=event)
        for column in ("entrant", "score", "tok/s", "bytes", "bits/char", "transforms"):
            numeric = column not in ("entrant", "transforms")
            table.add_column(column, justify="right" if numeric else "left")
        for r in rows:
            m = r["measured"]
            table.add_row(
                escape(r["name"]),
                f"{r['score']:.3f}",
                f"{m['tokens_per_second']:,.0f}",
                f"{m['bytes']:,}",
                f"{m['bits_per_char']:.3f}",
                escape(" ".join(r["transforms"]) or "none"),
            )
        console.print(table)
    if skipped:
        console.print(
            f"{skipped} record(s) in {safe(results_file())} are not valid results and were left out"
        )


CourseOpt = Annotated[
    Path | None,
    typer.Option(
        "--course", help="The course folder (default: here if it has nbgrader_config.py)."
    ),
]


@app.command("grade")
def grade_class(
    event: Annotated[str, typer.Argument(help="speed, size, quality or all-around.")],
    baseline: Annotated[
        Path, typer.Option(help="The instructor's trained run everyone is measured against.")
    ] = Path("runs/gpt"),
    course: CourseOpt = None,
    repeats: Annotated[int, typer.Option(min=1, help="Timed generations per measurement.")] = 5,
    budget: Annotated[
        float, typer.Option(min=1, help="quality: CPU-seconds of training for each model.")
    ] = 60.0,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial", help="Measure against a baseline that stopped before its last step."
        ),
    ] = False,
    heldout: Annotated[
        Path | None,
        typer.Option(
            help="Your own text file (at least 5,000 characters no student has seen) to measure "
            "bits per character on, instead of Python's documentation, which every student has."
        ),
    ] = None,
) -> None:
    """Instructor: measure every student's submitted run in EVENT against one baseline.

    The runs are submitted/STUDENT/20_capstone/run/, measured one at a time, into the
    gradebook's leaderboard table.
    """
    from tito.grading import class_olympics
    from tito.grading.course import find_course

    if event not in EVENT_NAMES:
        raise TitoError(f"no event '{event}'", hint=f"choose one of: {', '.join(EVENT_NAMES)}")
    from milestones import MilestoneError
    from milestones.runs import require_finished

    try:
        require_finished(baseline, allow_partial)
    except MilestoneError as err:
        raise TitoError(err.message, hint=err.hint) from None
    folder = find_course(course)
    results = class_olympics.measure_class(
        folder, event, baseline, repeats, budget, paths.root() / "data", heldout
    )
    for r in results:
        who = class_olympics.shown(r.student)
        if r.record is None:
            console.print(
                f"[bad]{escape(who)}: not measured:[/bad] {escape(class_olympics.shown(r.reason))}"
            )
        else:
            said = class_olympics.shown(r.record["violation"] or "")
            console.print(f"{escape(who)}: score {r.record['score']:.3f} {escape(said)}".rstrip())
    measured = sum(r.record is not None for r in results)
    ok(f"{measured} of {len(results)} submission(s) measured in {event}; `tito olympics board`")


@app.command("board")
def class_board(
    course: CourseOpt = None,
    to: Annotated[Path | None, typer.Option("--csv", help="Also write the board as CSV.")] = None,
) -> None:
    """Instructor: the class leaderboard kept in the gradebook, best first in each event."""
    from tito.grading import class_olympics
    from tito.grading.course import find_course

    folder = find_course(course)
    events = class_olympics.board(folder)
    if not events:
        console.print("no class results yet: run `tito olympics grade EVENT --baseline RUN`")
    for event, rows in events.items():
        table = Table(title=f"class: {event}")
        for column in ("student", "score", "tok/s", "bytes", "bits/char", "note"):
            numeric = column not in ("student", "note")
            table.add_column(column, justify="right" if numeric else "left")
        for row in rows:
            table.add_row(
                escape(class_olympics.shown(row["student"])),
                f"{row['score']:.3f}",
                "" if row["tokens_per_second"] is None else f"{row['tokens_per_second']:,.0f}",
                "" if row["bytes"] is None else f"{row['bytes']:,}",
                "" if row["bits_per_char"] is None else f"{row['bits_per_char']:.3f}",
                escape(class_olympics.shown(row["violation"])),
            )
        console.print(table)
    if to is not None:
        ok(f"wrote {class_olympics.export_csv(folder, to)}")
