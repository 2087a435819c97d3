"""Nothing a student typed into a package file is lost: before tito writes over a file of
tinytorch/ that holds text tito did not write, it copies it to the module's backups folder and
says so; and `tito module status` notices when the package no longer holds completed code."""

import json
import subprocess
from pathlib import Path

import nbformat

from tito.curriculum import notebooks
from tito.curriculum.catalog import find
from tito.student import progress

ACTIVATIONS = Path("tinytorch/core/activations.py")
TENSOR = Path("tinytorch/core/tensor.py")


def backups(project, name: str) -> list[Path]:
    return sorted((project / "workspace" / name / "backups").glob("*.py"))


def test_export_backs_up_a_hand_edit_and_names_the_backup(project, cli):
    package = project / ACTIVATIONS
    reference = package.read_text()
    package.write_text(reference + "# my edit\n")
    result = cli("module", "export", "--all")
    assert result.exit_code == 0
    (backup,) = backups(project, "02_activations")
    assert backup.name.startswith("activations-") and backup.read_text().endswith("# my edit\n")
    assert package.read_text() == reference
    (line,) = [s for s in result.stdout.splitlines() if "held edits" in s]
    assert line == (
        f"{project / ACTIVATIONS} held edits tito did not write; saved them to {backup} "
        "(tito writes the package files: edit your notebook in workspace/ instead)"
    )
    again = cli("module", "export", "--all")  # what tito wrote itself is no hand edit
    assert again.exit_code == 0 and "held edits" not in again.stdout
    assert backups(project, "02_activations") == [backup]


def test_what_tito_wrote_from_an_earlier_course_source_is_not_a_hand_edit(project, cli):
    # a course maintainer edits modules/ and exports, again and again
    source = project / find(2).source
    text = source.read_text()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "tinytorch"], cwd=project, check=True)
    for note in ("# first note", "# second note"):
        source.write_text(
            text.replace("class ReLU(Activation):", f"{note}\nclass ReLU(Activation):")
        )
        result = cli("module", "export", "2")
        assert result.exit_code == 0 and "held edits" not in result.stdout
        assert note in (project / ACTIVATIONS).read_text()
    assert backups(project, "02_activations") == []


def test_reset_backs_up_a_hand_edit(project, cli):
    cli("module", "open", "2")
    package = project / ACTIVATIONS
    package.write_text(package.read_text() + "# my edit\n")
    result = cli("module", "reset", "2", "--yes")
    assert result.exit_code == 0 and "held edits tito did not write" in result.stdout
    (backup,) = backups(project, "02_activations")
    assert backup.read_text().endswith("# my edit\n")


def test_complete_backs_up_a_hand_edit_of_completed_code(project, cli, monkeypatch):
    path = project / "workspace/01_tensor/tensor.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebooks.read_source(project / find(1).source), path)
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k broadcast_arithmetic")
    assert cli("module", "complete", "1").exit_code == 0
    package = project / TENSOR
    mine = package.read_text()
    assert backups(project, "01_tensor") == []  # the reference it replaced was tito's

    package.write_text(mine + "# my edit\n")
    kept = cli("module", "export", "--all")  # keeps completed code: nothing to back up
    assert "kept your completed code for 01 tensor" in kept.stdout and "held" not in kept.stdout
    assert package.read_text() == mine + "# my edit\n"
    said = " ".join(kept.stdout.split())  # kept as it stands, and said so
    assert (
        "01 tensor: tinytorch/ no longer holds the code you completed (edited by hand?); "
        "`tito module complete 1` installs it again, backing the edit up first" in said
    )
    result = cli("module", "complete", "1")
    assert result.exit_code == 0
    (backup,) = backups(project, "01_tensor")
    assert backup.read_text() == mine + "# my edit\n" and package.read_text() == mine
    assert f"{project / TENSOR} held edits tito did not write; saved them to {backup}" in (
        result.stdout
    )
    again = cli("module", "complete", "1")  # its own earlier completion is tito's
    assert again.exit_code == 0 and "held edits" not in again.stdout


def record(project, *numbers: int) -> None:
    """Modules recorded complete with package files that hold other text than the package's."""
    state = project / ".tito"
    state.mkdir(exist_ok=True)
    records = {}
    for number in numbers:
        (rel,) = find(number).package_files()
        files = {rel.relative_to("tinytorch").as_posix(): progress.digest("the student's code")}
        records[str(number)] = {
            "module": number,
            "passed": 3,
            "failed": 0,
            "completed_at": "2026-01-01T00:00:00+00:00",
            "files": files,
        }
    (state / "progress.json").write_text(json.dumps({"version": 1, "completed": records}))


def test_status_notices_completed_code_the_package_no_longer_holds(project, cli):
    # after `git checkout -- tinytorch` the package holds the course's code again
    record(project, 1, 2)
    said = " ".join(cli("module", "status").stdout.split())
    assert (
        "01 tensor, 02 activations: tinytorch/ no longer holds the code you completed (it was "
        "put back or changed since); install yours again: tito module complete --again" in said
    )
    record(project, 2)
    said = " ".join(cli("module", "status").stdout.split())
    assert "02 activations: tinytorch/ no longer holds" in said
    assert "install yours again: tito module complete 2" in said and "--again" not in said


def test_status_is_quiet_while_the_package_holds_completed_code(project, cli, monkeypatch):
    path = project / "workspace/01_tensor/tensor.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebooks.read_source(project / find(1).source), path)
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k broadcast_arithmetic")
    assert cli("module", "complete", "1").exit_code == 0
    assert "no longer holds" not in cli("module", "status").stdout


def test_export_writes_only_what_changes(project, cli):
    first = cli("module", "export", "--all")  # the project's package already holds the reference
    assert first.exit_code == 0 and "wrote" not in first.stdout
    assert "nothing to write" in first.stdout
    (project / ACTIVATIONS).unlink()
    again = cli("module", "export", "--all")
    assert again.exit_code == 0
    assert [s for s in again.stdout.splitlines() if s.startswith("wrote")] == [
        f"wrote {project / ACTIVATIONS}"
    ]
