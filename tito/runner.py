"""Run a module's pytest suite in a fresh interpreter and read back the real counts."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tito import paths
from tito.catalog import CourseModule
from tito.errors import require_torch


@dataclass
class TestRun:
    passed: int
    failed: int
    skipped: int
    output: str
    returncode: int

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.failed == 0 and self.passed > 0


def run_tests(module: CourseModule, package_parent: Path | None = None, extra=()) -> TestRun:
    """Run tests/NN_slug; the tests must import `tinytorch/` from `package_parent` if given."""
    require_torch("the module tests compare your code with")
    root = paths.root()
    env = dict(os.environ)
    if package_parent is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(package_parent), env.get("PYTHONPATH", "")])
        env["TINYTORCH_EXPECT"] = str(package_parent / "tinytorch")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            str(root / module.tests),
            "-q",
            "--tb=short",
            "-rfE",
            f"--junitxml={report}",
            f"--rootdir={root}",
            "-c",
            str(root / "pyproject.toml"),
            *extra,
        ]
        # `python -m` puts the working directory first on sys.path: run from the folder that
        # holds the tinytorch under test, so no other copy can shadow it.
        cwd = package_parent if package_parent is not None else root
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        passed = failed = skipped = 0
        if report.exists():
            for suite in ET.parse(report).getroot().iter("testsuite"):
                total = int(suite.get("tests", 0))
                bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
                skip = int(suite.get("skipped", 0))
                failed += bad
                skipped += skip
                passed += total - bad - skip
    if proc.returncode not in (0, 1, 5) and failed == 0:
        failed = 1  # pytest itself broke (collection or usage error): never count that as a pass
    return TestRun(passed, failed, skipped, proc.stdout + proc.stderr, proc.returncode)
