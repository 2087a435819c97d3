"""The historical milestones: perceptron (1957), xor (1969), mlp (1986) and cnn (1998)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import milestones
from milestones import cnn, history, perceptron, xor
from tito.cli.main import app

runner = CliRunner()


def said(result):
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def run(name, out, *options):
    result = runner.invoke(app, ["milestone", "run", name, "--out", str(out), *options])
    assert result.exit_code == 0, result.output
    return result, json.loads((out / "summary.json").read_text())


def is_png(path):
    return path.read_bytes()[:4] == b"\x89PNG"


def test_the_list_is_in_historical_order_with_years_and_modules():
    result = runner.invoke(app, ["milestone", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    lines = [line for line in result.output.splitlines() if line.startswith("│")]
    names = [line.split("│")[2].split(":")[0].strip() for line in lines]
    years = [int(line.split("│")[1]) for line in lines]
    assert names[:4] == ["perceptron", "xor", "mlp", "cnn"] and years == sorted(years)
    assert set(names) == {m.name for m in milestones.MILESTONES}
    rows = {line.split("│")[2].split(":")[0].strip(): line for line in lines}
    assert "1957" in rows["perceptron"] and "01-03" in rows["perceptron"]
    assert "1998" in rows["cnn"] and "01-09" in rows["cnn"]


def test_each_needs_only_the_modules_it_uses():
    needs = {m.name: m.requires for m in milestones.MILESTONES}
    assert needs["perceptron"] == (1, 2, 3)
    assert needs["xor"] == tuple(range(1, 7))
    assert needs["mlp"] == tuple(range(1, 9))
    assert needs["cnn"] == tuple(range(1, 10))


def test_the_list_marks_what_a_student_at_module_03_can_run(tmp_path, monkeypatch):
    package = tmp_path / "tinytorch" / "core"
    package.mkdir(parents=True)
    for name in ("tensor", "activations", "layers"):
        (package / f"{name}.py").write_text("")
    monkeypatch.setenv("TITO_ROOT", str(tmp_path))
    result = runner.invoke(app, ["milestone", "list"], env={"COLUMNS": "200"})
    rows = {
        line.split("│")[2].split(":")[0].strip(): line
        for line in result.output.splitlines()
        if "│" in line
    }
    assert "yes" in rows["perceptron"] and "missing 04 05 06" in rows["xor"]
    assert "missing 04 05 06 07 08 09" in rows["cnn"]


def test_code_line_names_whose_modules_run():
    assert history.code_line((1, 2, 3), frozenset({1, 3})) == (
        "code: your modules 01 03; reference module 02"
    )
    assert history.code_line((1, 2), frozenset()) == "code: reference modules 01 02"


def test_perceptron_converges_on_separable_points(tmp_path):
    result, summary = run("perceptron", tmp_path, "--quick")
    assert summary["converged"] and summary["accuracy"] == 1.0
    assert summary["mistakes_per_epoch"][-1] == 0 and summary["total_mistakes"] > 0
    assert is_png(tmp_path / "boundary.png")
    assert "1957" in said(result) and "Rosenblatt" in said(result) and "code: " in said(result)
    x, y, (w1, w2, b) = perceptron.points(np.random.default_rng(3), 300)
    assert np.all(np.abs(x @ [w1, w2] + b) >= perceptron.MARGIN - 1e-6)
    assert set(np.unique(y)) == {-1, 1}


def test_perceptron_full_run_converges_too(tmp_path):
    _, summary = run("perceptron", tmp_path, "--seed", "4")
    assert summary["points"] == 200 and summary["converged"]
    w1, w2, b = summary["line"]
    x, y, _ = perceptron.points(np.random.default_rng(4), 200)
    assert np.all(np.where(x @ [w1, w2] + b > 0, 1, -1) == y)


def test_xor_one_layer_is_stuck_and_two_layers_fit(tmp_path):
    result, summary = run("xor", tmp_path, "--quick")
    one, two = summary["one_layer"], summary["two_layers"]
    assert one["corner_accuracy"] <= xor.BEST_LINE and one["test_accuracy"] < 0.8
    assert two["corner_accuracy"] == 1.0 and two["test_accuracy"] >= 0.97
    assert one["parameters"] == 6 and two["parameters"] == 2 * 8 + 8 + 8 * 2 + 2
    assert is_png(tmp_path / "boundaries.png")
    assert "stuck at" in said(result) and "1969" in said(result)


def test_mlp_reaches_95_percent_on_the_digits(tmp_path):
    result, summary = run("mlp", tmp_path)
    assert summary["test_accuracy"] >= 0.95 and summary["reached_target"]
    assert summary["test_images"] == 360 and summary["parameters"] == 64 * 128 + 128 + 128 * 10 + 10
    assert len(summary["wrong"]) == round((1 - summary["test_accuracy"]) * 360)
    assert is_png(tmp_path / "mlp.png") and "1986" in said(result)


def test_mlp_quick_run(tmp_path):
    _, summary = run("mlp", tmp_path, "--quick")
    assert summary["epochs"] < 20 and summary["test_accuracy"] > 0.9


def test_cnn_beats_the_mlp_with_fewer_parameters(tmp_path):
    result, summary = run("cnn", tmp_path, "--quick")
    ours, theirs = summary["cnn"], summary["mlp"]
    assert ours["parameters"] < theirs["parameters"]
    assert ours["test_accuracy"] > theirs["test_accuracy"] and ours["test_accuracy"] >= 0.97
    assert summary["more_accurate_than_mlp"] and summary["fewer_parameters_than_mlp"]
    filters = np.array(summary["first_layer_filters"])
    assert filters.shape == (cnn.CHANNELS[0], 3, 3)
    assert is_png(tmp_path / "cnn.png") and "LeCun" in said(result)


@pytest.mark.parametrize("name", ["perceptron", "xor", "mlp", "cnn"])
def test_options_they_have_no_use_for_are_refused(tmp_path, name):
    result = runner.invoke(app, ["milestone", "run", name, "--out", str(tmp_path), "--resume"])
    assert result.exit_code == 1
    assert said(result).startswith(f"error: --resume does not apply to {name}: it ")


@pytest.mark.parametrize("name", ["perceptron", "xor", "mlp", "cnn"])
def test_each_runs_on_a_package_of_only_its_modules(tmp_path, name):
    """A student who has just finished the last module a milestone needs can run it."""
    import shutil
    import subprocess
    import sys

    from tito.curriculum.catalog import GIVEN, MODULES
    from tito.curriculum.paths import PACKAGE_ROOT

    milestone = milestones.find(name)
    keep = {p.as_posix() for m in MODULES if m.number in milestone.requires
            for p in m.package_files()} | set(GIVEN)  # fmt: skip
    shutil.copytree(PACKAGE_ROOT / "tinytorch", tmp_path / "tinytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copytree(PACKAGE_ROOT / "data", tmp_path / "data")
    for path in (tmp_path / "tinytorch").rglob("*.py"):
        if path.name != "__init__.py" and path.relative_to(tmp_path).as_posix() not in keep:
            path.unlink()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; import milestones; "
        "import tinytorch; assert tinytorch.__file__.startswith(sys.argv[1]); "
        "s = milestones.find(sys.argv[2]).run(milestones.RunOptions(Path(sys.argv[1]) / 'out', "
        "quick=True)); print(sorted(s['files']))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path), name], cwd=PACKAGE_ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "summary.json" in done.stdout.splitlines()[-1]


def test_the_list_fits_80_columns_without_cutting_a_word():
    result = runner.invoke(app, ["milestone", "list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in result.output
    said = " ".join(line.split("│")[2].strip() for line in lines if line.startswith("│"))
    for m in milestones.MILESTONES:
        assert f"{m.name}: {m.description}" in said
