"""Every module can be completed in a student edition: its tests pass with the modules before it
written (the reference standing in for the student's own) and every later module holding the
edition's stubs. So a module's checks ask nothing of code the student has not reached: module
02's gradient checks need no module 05, module 13's generation no module 17.
"""

import os
import subprocess
import sys

import pytest

from tito.curriculum import staging
from tito.curriculum.catalog import MODULES
from tito.curriculum.paths import PACKAGE_ROOT
from tito.grading import edition


@pytest.fixture(scope="module")
def stubbed(tmp_path_factory):
    """An edition that publishes nothing: every module holds its stubs."""
    out = tmp_path_factory.mktemp("edition") / "course"
    return edition.build(out, [], root=PACKAGE_ROOT).folder


def write_reference(module, folder) -> None:
    """The module as a student who wrote it correctly holds it: its lesson and package files."""
    (folder / module.source).write_text((PACKAGE_ROOT / module.source).read_text())
    for rel, body in staging.reference_files(module).items():
        (folder / "tinytorch" / rel).write_text(body)


def test_each_module_passes_its_tests_with_only_the_modules_before_it_written(stubbed):
    for module in MODULES:  # the premise: unwritten, a module's code raises "write this part"
        body = (stubbed / module.package_files()[0]).read_text()
        assert f'module {module.number:02d} {module.slug}: write this part")' in body
    env = {**os.environ, "PYTHONPATH": str(stubbed), "TITO_ROOT": str(stubbed)}
    env.pop("PYTEST_ADDOPTS", None)
    failed = {}
    for module in MODULES:  # in course order: module N runs with 01..N written, the rest stubs
        write_reference(module, stubbed)
        run = subprocess.run(
            [sys.executable, "-m", "pytest", module.tests, "-q", "-p", "no:cacheprovider",
             "--tb=line", "--no-header"],
            cwd=stubbed, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if run.returncode != 0:
            failed[module.name] = run.stdout[-1500:]
        else:
            assert " passed" in run.stdout, (module.name, run.stdout[-500:])
    assert not failed, failed
