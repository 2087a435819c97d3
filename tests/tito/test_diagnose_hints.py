"""`tito diagnose` on a slip that is no operation's: a training loop that forgets
`optimizer.zero_grad()` gives the reference's numbers for a step, then drifts. The first value
that differs is on a correct line, so the finding says the difference builds up over the steps
of the loop, not that this line is wrong, and guesses no epsilon (none is in its formula)."""

import nbformat

from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import find
from tito.student.diagnose import diagnose

ZERO_GRAD = ("    optimizer.zero_grad()\n    if backward", "    if backward")


def test_a_difference_that_builds_up_over_a_loop_says_so(tmp_path):
    nb = notebooks.read_source(paths.source(find(7)))
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")
             and ZERO_GRAD[0] in c.source]  # fmt: skip
    assert len(cells) == 1
    cells[0].source = cells[0].source.replace(*ZERO_GRAD)
    path = tmp_path / "training.ipynb"
    nbformat.write(nb, path)
    finding = {f.check: f for f in diagnose(find(7), path).findings}["test-train-step"]
    assert "first different at its call 3 from the same line" in finding.what
    assert "builds up over the steps of a loop" in finding.hint
    assert "not on this line" in finding.hint and "epsilon" not in finding.hint
    assert finding.place.endswith("loss = loss_fn(model(x), y)")
