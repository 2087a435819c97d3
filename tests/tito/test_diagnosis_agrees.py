"""`tito diagnose N` (the student's machine) and `tito grade feedback N --diagnose` (the grading
sandbox) say the same about the same notebook on the same seed: nothing about the reference,
also where the sandboxed trace's budget runs out before the end (it then compares nothing
there), and the same first operation about a slip. What a student reads when a check fails
names the cause in their terms, and the course's own demo cells never blame them."""

from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
import numpy as np
import pytest

from tito.curriculum import notebooks, paths, staging
from tito.curriculum.catalog import find
from tito.grading import scoring
from tito.sandbox import limits
from tito.student.diagnose import diagnose, explain, reference_trace, submission_trace

MODULE = find(13)
SLIP = ("return self.linear2(self.gelu(self.linear1(x)))", "return self.linear2(self.linear1(x))")


@pytest.fixture(scope="module")
def reference():
    return reference_trace(MODULE)


def both(source, folder: Path, reference) -> tuple:
    """(student-side diagnosis, sandboxed diagnosis) of one notebook, on the same seed."""
    notebook = folder / f"{MODULE.slug}.ipynb"
    nbformat.write(source, notebook)
    local = diagnose(MODULE, notebook, reference=reference)
    student, cells = submission_trace(MODULE, nbformat.read(notebook, 4))
    return local, explain(MODULE, student, cells, reference)


@pytest.mark.parametrize("budget", [limits.TRACE_NUMBERS_BYTES, 256 * 1024])
def test_the_reference_has_no_finding_in_either(reference, tmp_path, monkeypatch, budget):
    # at 2 MiB the sandboxed trace of module 13 was cut, and what it no longer held was
    # reported as "no numeric value" in a correct MLP line of the 9/9 reference
    monkeypatch.setattr(limits, "TRACE_NUMBERS_BYTES", budget)
    local, sandboxed = both(notebooks.read_source(paths.source(MODULE)), tmp_path, reference)
    assert local.findings == [] and sandboxed.findings == [], sandboxed.findings
    assert local.checks == sandboxed.checks and len(local.checks) == 5  # module 13: five checks


def test_a_slip_is_found_at_the_same_operation_in_both(reference, tmp_path):
    source = notebooks.read_source(paths.source(MODULE))
    cell = next(c for c in source.cells if SLIP[0] in c.source)
    cell.source = cell.source.replace(*SLIP)
    local, sandboxed = both(source, tmp_path, reference)
    assert local.findings and [(f.check, f.what, f.summary) for f in local.findings] == [
        (f.check, f.what, f.summary) for f in sandboxed.findings
    ]
    assert local.findings[0].check == "test-mlp-block"


def test_a_parameter_without_a_gradient_is_named_in_the_students_terms():
    from tinytorch.checks import outputs
    from tinytorch.core.layers import Linear
    from tinytorch.core.tensor import Tensor

    used, unused = Linear(3, 2), Linear(3, 2)  # like a position embedding never added in
    x = Tensor(np.ones((4, 3), np.float32), requires_grad=True)
    used(x).sum().backward()
    grads = np.concatenate([np.ravel(p.grad) for m in (used, unused) for p in m.parameters()])
    with pytest.raises(TypeError) as raised:
        outputs({"dparams": grads})
    said = str(raised.value)
    assert "not numeric (dtype object)" not in said
    assert "'dparams' holds None where numbers belong: a parameter got no gradient" in said
    assert "every layer and embedding you create is used" in said


def test_the_courses_demo_cells_never_blame():
    # module 17's timing cell imports matplotlib, which the sandbox does not have by design; it is
    # tagged demo, so no check runs it; untagged, it fails in the sandbox and still blames nothing
    module = find(17)
    source = notebooks.read_source(paths.source(module))
    untagged = nbformat.from_dict(source)
    for cell in untagged.cells:
        cell.get("metadata", {}).pop("tags", None)
    with tempfile.TemporaryDirectory() as folder:
        staging.stage_reference(module, Path(folder))
        tagged = scoring.score(module, source, source, Path(folder), 60.0)
        scored = scoring.score(module, untagged, untagged, Path(folder), 60.0)
    assert all(check.passed for check in tagged.checks), tagged.checks
    assert not any("matplotlib" in note for note in tagged.notes)  # the demo did not run
    assert all(check.passed for check in scored.checks), scored.checks
    assert any("matplotlib" in note for note in scored.notes)  # it did fail in the sandbox
    assert tagged.summary() == scored.summary() == ""
