"""Autograde throughput: submissions per minute for `tito grade autograde N --jobs K`.

    python -m benchmarks.grading [--module 13] [--students 40] [--jobs 1 2]

Makes a course folder in a temporary directory, releases the module, submits a class (a quarter
each: reference solution, blank release, half done, a syntax error), then autogrades the whole
class once per --jobs value in the sandbox, and once with --unsafe (no sandbox) for the cost of
the sandbox itself. Prints a Markdown section for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

from tito.curriculum.catalog import find
from tito.grading import course
from tito.grading import nbgrader as grading


def _class(source, release, count: int) -> dict[str, object]:
    solutions = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")]
    half = nbformat.from_dict(release)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in half.cells}
    for cell in solutions[: len(solutions) // 2]:
        by_id[cell.metadata["nbgrader"]["grade_id"]].source = cell.source
    broken = nbformat.from_dict(source)
    first = solutions[0].metadata["nbgrader"]["grade_id"]
    next(c for c in broken.cells if c.metadata.get("nbgrader", {}).get("grade_id") == first)[
        "source"
    ] += "\n    def broken(:\n"
    kinds = [("honest", source), ("blank", release), ("half", half), ("syntax", broken)]
    return {f"{kinds[i % 4][0]}{i:02d}": kinds[i % 4][1] for i in range(count)}


def measure(number: int, count: int, jobs_list: list[int]) -> list[tuple[str, float, float]]:
    module = find(number)
    folder = Path(tempfile.mkdtemp(prefix="tito-bench-course-"))
    try:
        course.init_course(folder, timeout=60)
        grading.generate(folder, module)
        name = grading.notebook_file(module)
        source = nbformat.read(folder / "source" / module.name / name, as_version=4)
        release = nbformat.read(folder / "release" / module.name / name, as_version=4)
        for student, nb in _class(source, release, count).items():
            target = folder / "submitted" / student / module.name / name
            target.parent.mkdir(parents=True)
            nbformat.write(nb, target)
        rows = []
        runs = [(f"--jobs {j}", j, False) for j in jobs_list] + [("--jobs 1 --unsafe", 1, True)]
        for label, jobs, unsafe in runs:
            start = time.perf_counter()
            outcomes = grading.autograde(folder, module, jobs=jobs, unsafe=unsafe)
            wall = time.perf_counter() - start
            assert len(outcomes) == count and all(o.ok for o in outcomes)
            rows.append((label, wall, sum(o.seconds for o in outcomes) / count))
        return rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", type=int, default=13)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = measure(args.module, args.students, args.jobs)
    print("## Autograde throughput (tito grade autograde --jobs)\n")
    print(
        f"Module {args.module}, {args.students} submissions (a quarter each: reference, blank, "
        "half done, syntax error), `python -m benchmarks.grading`; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, load average before "
        f"{load:.1f}, after {os.getloadavg()[0]:.1f}.\n"
    )
    print("| run | wall s | submissions/min | sandboxed process s per submission |")
    print("|---|--:|--:|--:|")
    for label, wall, per in rows:
        print(f"| `{label}` | {wall:.1f} | {60 * args.students / wall:.1f} | {per:.2f} |")


if __name__ == "__main__":
    main()
