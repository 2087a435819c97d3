"""Bad input and faults: one clear line, a non-zero exit, nothing already written lost."""

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tito.cli.main import app

PROSE = "the cat sat on the mat and the dog ran to the park by the river. " * 20
runner = CliRunner()


def said(result):
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def gpt(*args):
    return runner.invoke(app, ["milestone", "run", "gpt", "--config", "nano", *map(str, args)])


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "prose.txt"
    path.write_text(PROSE, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"", "is empty"),
        (b"  \n\n ", "is empty"),
        (b"text\x00with a NUL byte", "binary"),
        (b"caf\xe9 latin-1", "not UTF-8"),
        (b"aaaaaaaaaaaaaaaaaaaa", "one distinct character"),
        (b"short text", "needs at least"),
    ],
)
def test_bad_data_files(tmp_path, content, message):
    path = tmp_path / "data.txt"
    if content is not None:
        path.write_bytes(content)
    result = gpt("--data", path, "--out", tmp_path / "out", "--steps", 5)
    assert result.exit_code == 1
    assert message in said(result) and "error:" in said(result)
    assert "Traceback" not in said(result)


def test_data_folder_is_named_a_folder(tmp_path):
    result = gpt("--data", tmp_path, "--out", tmp_path / "out", "--steps", 5)
    assert result.exit_code == 1 and "is a folder, not a text file" in said(result)


@pytest.mark.parametrize(
    ("option", "message"),
    [(["--steps", 0], "--steps must be at least 1"), (["--seed", -1], "--seed must be")],
)
@pytest.mark.parametrize("name", ["gpt", "attention"])
def test_bad_numbers_name_their_option(tmp_path, text_file, name, option, message):
    args = ["milestone", "run", name, "--data", str(text_file), "--out", str(tmp_path / "o")]
    result = runner.invoke(app, [*args, *map(str, option)])
    assert result.exit_code == 1 and message in said(result)
    assert "Traceback" not in said(result) and not (tmp_path / "o").exists()


def test_output_path_too_long_for_the_checkpoint_fails_before_training(tmp_path, text_file):
    out = tmp_path
    while len(str(out)) < 4096 - 30:  # the folder fits, its checkpoint's temporary name does not
        out = out / ("d" * min(200, 4096 - 30 - len(str(out)) - 1))
    result = gpt("--data", text_file, "--out", out, "--steps", 5)
    assert result.exit_code == 1 and "cannot write to the output folder" in said(result)
    assert "training" not in said(result)


def test_output_folder_that_cannot_be_written(tmp_path, text_file):
    blocker = tmp_path / "a-file"
    blocker.write_text("keep me")
    result = gpt("--data", text_file, "--out", blocker / "out", "--steps", 5)
    assert result.exit_code == 1 and "cannot write to the output folder" in said(result)
    assert f"hint: pass --out DIR naming a folder: {blocker} is a file" in said(result)
    assert blocker.read_text() == "keep me"


@pytest.mark.parametrize(
    ("error", "hint"),
    [
        (errno.EACCES, "naming a folder you may write to (this one is read-only to you)"),
        (errno.EROFS, "naming a folder you may write to (this one is read-only to you)"),
        (errno.ENAMETOOLONG, "with a shorter path"),
        (errno.ENOSPC, "free some disk space, or pass --out DIR on another disk"),
    ],
)
def test_each_output_folder_error_gets_its_own_hint(tmp_path, text_file, monkeypatch, error, hint):
    def refuse(self, *args, **kwargs):
        raise OSError(error, os.strerror(error), str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    result = gpt("--data", text_file, "--out", tmp_path / "out", "--steps", 5)
    assert result.exit_code == 1 and os.strerror(error) in said(result)
    assert said(result).endswith(hint)


def test_a_text_too_short_for_the_config_names_a_config_it_fits(tmp_path, text_file):
    short = tmp_path / "short.txt"
    short.write_text(PROSE[:100])  # 100 characters: enough for nano (16), not tiny
    args = ["--data", str(short), "--out", str(tmp_path / "o")]
    result = runner.invoke(app, ["milestone", "run", "gpt", "--config", "tiny", *args])
    assert result.exit_code == 1
    assert said(result).endswith(
        "hint: use a longer --data file or a smaller config (--config nano)"
    )
    short.with_name("tiny.txt").write_text(PROSE[:20])
    result = gpt("--data", short.with_name("tiny.txt"), "--out", tmp_path / "o")
    assert result.exit_code == 1 and said(result).endswith("hint: use a longer --data file")


def test_resume_without_a_checkpoint(tmp_path, text_file):
    result = gpt("--data", text_file, "--out", tmp_path / "out", "--resume")
    assert result.exit_code == 1 and "no checkpoint" in said(result)


def test_resume_from_a_damaged_checkpoint_keeps_it(tmp_path, text_file):
    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoint.npz").write_bytes(b"PK\x03\x04 not really a zip")
    result = gpt("--data", text_file, "--out", out, "--resume")
    assert result.exit_code == 1 and "damaged" in said(result)
    assert (out / "checkpoint.npz").read_bytes() == b"PK\x03\x04 not really a zip"


@pytest.mark.parametrize(
    ("change", "message"),
    [(["--seed", "5"], "different seed"), (["--steps", "12"], "different steps")],
)
def test_resume_with_a_mismatched_run(tmp_path, text_file, change, message):
    out = tmp_path / "out"
    assert gpt("--data", text_file, "--out", out, "--steps", 10).exit_code == 0
    before = (out / "checkpoint.npz").read_bytes()
    result = gpt("--data", text_file, "--out", out, "--resume", *change)
    assert result.exit_code == 1 and message in said(result)
    assert (out / "checkpoint.npz").read_bytes() == before


def test_resume_with_other_data(tmp_path, text_file):
    out = tmp_path / "out"
    assert gpt("--data", text_file, "--out", out, "--steps", 10).exit_code == 0
    other = tmp_path / "other.txt"
    other.write_text(PROSE.upper())
    result = gpt("--data", other, "--out", out, "--resume")
    assert result.exit_code == 1 and "different corpus" in said(result)


def test_resume_with_another_config(tmp_path, text_file):
    out = tmp_path / "out"
    assert gpt("--data", text_file, "--out", out, "--steps", 10).exit_code == 0
    result = runner.invoke(
        app,
        ["milestone", "run", "gpt", "--config", "tiny", "--data", str(text_file),
         "--out", str(out), "--resume"],
    )  # fmt: skip
    assert result.exit_code == 1 and "different config" in said(result)


def test_unknown_names(tmp_path):
    result = runner.invoke(app, ["milestone", "run", "bert"])
    assert result.exit_code == 1 and "unknown milestone 'bert'" in said(result)
    result = gpt("--config", "huge", "--out", tmp_path / "out")
    assert result.exit_code == 1


def test_missing_modules_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("TITO_ROOT", str(tmp_path))
    result = runner.invoke(app, ["milestone", "run", "gpt"])
    assert result.exit_code == 1 and "needs modules" in said(result)
    listing = runner.invoke(app, ["milestone", "list"])
    assert listing.exit_code == 0 and "missing" in said(listing)
