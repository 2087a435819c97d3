"""What `tito grade init` tells an instructor: where to go next, and what its settings do."""

from typer.testing import CliRunner

from tito.cli.main import app
from tito.curriculum.paths import PACKAGE_ROOT
from tito.grading import course


def said(result) -> str:
    return " ".join(result.output.split())


def test_init_of_another_folder_says_to_cd_there_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["grade", "init", "classes/fall"])
    assert done.exit_code == 0, done.output
    assert said(done).endswith(
        "next: cd classes/fall, then tito grade generate N "
        "(or, from here, tito grade generate N --course classes/fall)"
    )


def test_init_of_the_folder_the_commands_find_needs_no_cd(tmp_path, monkeypatch):
    monkeypatch.setenv("TITO_ROOT", str(tmp_path))  # <project>/course, found without --course
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["grade", "init"])
    assert done.exit_code == 0, done.output
    assert said(done).endswith("next: tito grade generate N")


def test_the_config_and_the_guide_agree_on_what_the_kernel_name_is_for(tmp_path):
    config = course.TITO_CONFIG_TEMPLATE
    guide = " ".join((PACKAGE_ROOT / "docs" / "instructor.md").read_text().split())
    comment = " ".join(line.lstrip("# ") for line in config.splitlines() if line.startswith("#"))
    assert "runs each graded cell in its sandbox" in comment and "not in a kernel" in comment
    assert "nbgrader's own commands" in comment
    assert "`ExecutePreprocessor.kernel_name` (which `tito_config.py` sets to `python3`) is " \
        "not used by `tito grade autograde`" in guide  # fmt: skip
