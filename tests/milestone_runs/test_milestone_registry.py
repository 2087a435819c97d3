"""The registry: every entry resolves and every size is a preset."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import milestones
from tinytorch.models.transformer import PRESETS
from tito.curriculum.catalog import MODULES


@pytest.mark.parametrize("milestone", milestones.MILESTONES, ids=lambda m: m.name)
def test_entry_point_and_preset_resolve(milestone):
    module, function = milestone.entry.split(":")
    assert callable(getattr(importlib.import_module(module), function))
    if milestone.preset is None:  # the historical milestones train no GPT
        with pytest.raises(milestones.MilestoneError, match="has no model preset"):
            _ = milestone.config
    else:
        assert milestone.config is PRESETS[milestone.preset]
    assert milestones.find(f" {milestone.name.upper()} ") is milestone


def test_unknown_name_is_a_milestone_error_naming_the_choices():
    with pytest.raises(milestones.MilestoneError, match="unknown milestone 'bert'") as err:
        milestones.find("bert")
    assert "gpt" in err.value.hint


def test_the_registry_imports_no_tinytorch():
    # tito lists milestones and checks their modules before the package is complete
    code = (
        "import milestones, sys; assert 'tinytorch' not in {m.split('.')[0] for m in sys.modules}"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def imports_of(name: str) -> set[str]:
    tree = ast.parse((Path(milestones.__file__).parent / f"{name}.py").read_text(encoding="utf-8"))
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    found |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    for node in ast.walk(tree):  # `from milestones import plots, report`
        if isinstance(node, ast.ImportFrom) and node.module == "milestones":
            found |= {f"milestones.{a.name}" for a in node.names}
    return found


# Imports inside a function that only a later milestone's files reach: runs.build_model builds
# module 21's Llama for a checkpoint `tito milestone run llama` wrote (which needed module 21).
LATER = {"runs": {"tinytorch.models.llama"}}


@pytest.mark.parametrize("milestone", milestones.MILESTONES, ids=lambda m: m.name)
def test_requires_lists_every_module_the_run_imports(milestone):
    homes = {f"tinytorch.{dotted}": m.number for m in MODULES for dotted in m.exports}
    todo, seen, needed = [milestone.entry.split(":")[0].split(".")[1]], set(), set()
    while todo:
        name = todo.pop()
        # the registry imports module 13 only inside `Milestone.config`, which the milestones
        # without a GPT preset never call (it raises for them); their own imports are walked
        skip = name == "registry" and milestone.preset is None
        if skip or name in seen or not (Path(milestones.__file__).parent / f"{name}.py").exists():
            continue
        seen.add(name)
        for dotted in imports_of(name) - LATER.get(name, set()):
            if dotted in homes:
                needed.add(homes[dotted])
            elif dotted.startswith("milestones."):
                todo.append(dotted.split(".")[1])
    assert needed and needed <= set(milestone.requires)


README = Path(milestones.__file__).parent.parent / "README.md"


def _said(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("name", "quick", "sentence"),
    [
        ("gpt", False, "It takes {} on 2 idle cores"),
        ("gpt", True, "`tito milestone run gpt --quick` ({} on 2 idle cores)"),
        ("translate", False, "for comparison: {}, `--quick`"),
        ("translate", True, "`--quick` {}."),
        ("compress", True, "`runs/gpt-quick`) takes {}."),
    ],
)
def test_the_readme_states_the_registrys_times(name, quick, sentence):
    stated = milestones.find(name).stated(quick)
    assert stated != "not measured"
    assert sentence.format(stated) in _said(README.read_text(encoding="utf-8"))


def test_milestone_list_states_the_same_times():
    from typer.testing import CliRunner

    from tito.cli.main import app

    result = CliRunner().invoke(app, ["milestone", "list"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    rows = {
        line.split("│")[2].split(":")[0].strip(): line
        for line in result.output.splitlines()
        if "│" in line
    }
    for m in milestones.MILESTONES:
        assert f"{m.stated(True, brief=True)} / {m.stated(False, brief=True)}" in rows[m.name]


def test_stated_rounds_as_a_person_would():
    assert [milestones.registry.stated(s) for s in (None, 3, 12.5, 20, 170, 400)] == [
        "not measured", "a few seconds", "about 15 s", "about 20 s", "about 3 minutes",
        "about 7 minutes",
    ]  # fmt: skip
    assert [milestones.registry.stated(s, brief=True) for s in (None, 3, 12.5, 170)] == [
        "?", "< 10 s", "15 s", "3 min"
    ]  # fmt: skip


@pytest.mark.parametrize("typed, meant", [("gtp", "gpt"), ("perceptorn", "perceptron"),
                                          ("Compres", "compress")])  # fmt: skip
def test_a_misspelt_name_gets_a_did_you_mean(typed, meant):
    with pytest.raises(milestones.MilestoneError, match=f"did you mean '{meant}'") as err:
        milestones.find(typed)
    assert "gpt" in err.value.hint


def test_the_readme_milestone_table_gives_each_milestones_modules_as_the_registry_does():
    """Issue 38: the README gave gpt's modules as "01-13, 17, 18" where the registry (and
    `tito milestone list`) says "01-08 10-13 17 18"."""
    from tito.curriculum.catalog import number_ranges
    from tito.curriculum.paths import PACKAGE_ROOT

    text = (PACKAGE_ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("| year | milestone | what it reproduces | modules |")
    rows = text[start : text.index("\n\n", start)].splitlines()[2:]
    table = {}
    for row in rows:
        year, name, _, modules = (cell.strip() for cell in row.strip("|").split("|"))
        table[name.strip("`")] = (int(year), modules)
    assert table == {m.name: (m.year, number_ranges(m.requires)) for m in milestones.MILESTONES}
