"""`tito diagnose` never says all is well while a check fails: a check's plain `assert` that does
not hold, where no operation's numbers differ, is reported at its line in the notebook."""

import nbformat

from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import find

COPIES = ("return window[:-1], window[1:]", "return window[:-1].copy(), window[1:].copy()")


def test_a_failing_plain_assert_is_named_at_its_line(tmp_path, cli):
    # copies instead of views: every number is right, and the check's assert on views fails
    nb = notebooks.read_source(paths.source(find(8)))
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")
             and COPIES[0] in c.source]  # fmt: skip
    assert len(cells) == 1
    cells[0].source = cells[0].source.replace(*COPIES)
    path = tmp_path / "dataloader.ipynb"
    nbformat.write(nb, path)
    result = cli("diagnose", "8", "--notebook", str(path))
    assert result.exit_code == 1, result.output
    assert "differs  test-lm-windows: an assert of the check does not hold" in result.output
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    check = ids.index("test-lm-windows") + 1
    line = nb.cells[check - 1].source.splitlines().index("    assert np.shares_memory(x, tokens)")
    place = f"dataloader.ipynb, cell {check}, line {line + 1}: assert np.shares_memory(x, tokens)"
    assert place in result.output
    assert "every operation" not in result.output
