"""`tito diagnose` and `tito module complete` name the method a slip is in (forward or backward),
with the student's cell and line, where the checks call a Function's methods themselves (modules
01 and 02 have no engine), where a cell does not even compile, where numpy's own message says
nothing of shapes, and where a wrong forward makes a right backward look wrong."""

import re
import shutil

import nbformat
import numpy as np
import pytest
from fdcheck import check_function

from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import find
from tito.curriculum.paths import PACKAGE_ROOT
from tito.errors import TitoError
from tito.sandbox import npzwire
from tito.student.diagnose import diagnose, reference_trace
from tito.student.traces import read_trace

SUB_SIGN = ("        return grad, -grad", "        return grad, grad")
MEAN_COUNT = ("return (_expand(grad / self.count,", "return (_expand(grad,")
GELU_THREE = (
    "du = GELU_SCALE * (1 + 3 * GELU_CUBIC * x * x)",
    "du = GELU_SCALE * (1 + GELU_CUBIC * x * x)",
)
SOFTMAX_AXIS = (
    "total = e.sum(axis=self.axis, keepdims=True)",
    "total = e.sum(axis=-1, keepdims=True)",
)


def slipped(number: int, slips, folder):
    """The reference notebook of a module with each (old, new) of `slips` made in the one
    solution cell that holds `old`."""
    nb = notebooks.read_source(paths.source(find(number)))
    for old, new in slips:
        cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")
                 and old in c.source]  # fmt: skip
        assert len(cells) == 1, old
        cells[0].source = cells[0].source.replace(old, new)
    path = folder / f"{find(number).slug}.ipynb"
    nbformat.write(nb, path)
    return path


def cell_text(path, place: str) -> str:
    """The line of the notebook that a place ("x.ipynb, cell 7, line 3: ...") names."""
    match = re.fullmatch(r".+\.ipynb, cell (\d+), line (\d+): .*", place)
    assert match, place
    cell = nbformat.read(path, as_version=4).cells[int(match.group(1)) - 1]
    return cell.source.splitlines()[int(match.group(2)) - 1]


def by_check(result) -> dict:
    return {f.check: f for f in result.findings}


def test_a_backward_the_check_calls_itself_is_named_with_its_cell(tmp_path):
    path = slipped(1, [SUB_SIGN, MEAN_COUNT], tmp_path)
    found = by_check(diagnose(find(1), path))
    sub, mean = found["test-arithmetic"], found["test-reductions"]
    assert sub.what == "Sub.backward, gradient for input 2 of 2" and "sign slip" in sub.hint
    assert mean.what == "Mean.backward, gradient for input 1 of 1"
    assert "4 times larger than expected" in mean.hint
    for finding, cls in ((sub, "class Sub("), (mean, "class Mean(")):
        assert cell_text(path, finding.place).strip() == "def backward(self, grad):"
        cell = int(finding.place.split("cell ")[1].split(",")[0])
        assert cls in nbformat.read(path, as_version=4).cells[cell - 1].source


def test_a_slip_in_an_operations_own_gradient_is_not_blamed_on_an_engine(tmp_path):
    path = slipped(2, [GELU_THREE], tmp_path)
    finding = by_check(diagnose(find(2), path))["test-gelu"]
    assert finding.what == "GELUFunction.backward, gradient for input 1 of 1"
    assert GELU_THREE[1] in cell_text(path, finding.place) and "engine" not in finding.hint


def test_direct_calls_and_the_engines_are_each_recorded_once():
    events = next(c for c in reference_trace(find(2)).checks if c["label"] == "test-gelu")["events"]
    kinds = [(e["kind"], e["op"]) for e in events if e["kind"] in ("forward", "backward")]
    # gelu(x) through apply, then forward and backward called directly, twice
    assert kinds == [("forward", "GELUFunction"), *[("forward", "GELUFunction"),
                     ("backward", "GELUFunction")] * 2]  # fmt: skip


def test_a_syntax_error_is_placed_like_every_other_error_and_its_knock_ons_say_so(tmp_path):
    path = slipped(1, [("        return a + b\n", "        return a + (b\n")], tmp_path)
    result = diagnose(find(1), path)
    assert len(result.notes) == 1 and "<cell" not in result.notes[0]
    note = result.notes[0]
    assert note.startswith("SyntaxError: '(' was never closed, at tensor.ipynb, cell ")
    place = note.split(", at ", 1)[1]
    assert cell_text(path, place) == "        return a + (b"
    cell = place.split(", line ")[0]
    assert result.findings
    for finding in result.findings:
        assert finding.hint == f"a knock-on of your failed cell ({cell}): fix that first"
        assert "the place says where" not in finding.hint


def test_numpys_matmul_mismatch_is_a_shape_error_at_the_students_line(tmp_path):
    old = "ga = sum_to_shape(g @ np.swapaxes(b2, -1, -2), a2.shape)"
    path = slipped(1, [(old, "ga = sum_to_shape(g @ b2, a2.shape)")], tmp_path)
    finding = by_check(diagnose(find(1), path))["test-matmul"]
    assert finding.what == "the check stopped with an error in MatMul.backward"
    assert "mismatch in its core dimension" in finding.summary
    assert finding.hint == "a shape does not fit: print the shapes of each step"
    assert "ga = sum_to_shape(g @ b2, a2.shape)" in cell_text(path, finding.place)


@pytest.mark.parametrize("raised", ["MatMul", ["elementwise", 3], ["c", "f" * 201], [None, "f"]])
def test_a_crafted_failing_function_costs_only_that_trace(raised):
    check = {"label": "t", "events": [], "results": {}, "where": [], "raised_in": raised}
    with pytest.raises(TitoError, match="no usable trace"):
        read_trace(npzwire.pack({}, {"setup": [], "checks": [check]}))
    check["raised_in"] = ["elementwise", "Sub.backward"]
    assert read_trace(npzwire.pack({}, {"setup": [], "checks": [check]})).checks == [check]


def test_diagnose_names_a_wrong_forward_as_the_forward(tmp_path):
    path = slipped(2, [SOFTMAX_AXIS], tmp_path)
    finding = by_check(diagnose(find(2), path))["test-softmax"]
    assert finding.what == "SoftmaxFunction.forward"
    assert SOFTMAX_AXIS[1] in cell_text(path, finding.place)
    assert "a softmax (or normalisation) over the wrong axis" in finding.hint


def test_check_function_names_a_wrong_forward_before_blaming_the_backward():
    class Sine:
        needs_grad = (True,)

        def forward(self, x):
            self.x = x
            return 2 * np.sin(x)  # the slip: the right output is sin(x)

        def backward(self, grad):
            return (grad * np.cos(self.x),)  # right for sin(x)

    x = np.linspace(-1, 1, 5)
    with pytest.raises(AssertionError) as caught:
        check_function(Sine, x, reference=np.sin)
    message = str(caught.value)
    assert message.startswith("Sine.forward: its output is wrong: it differs from the expected")
    assert message.endswith("Sine.backward is checked against the forward once it is right")
    assert caught.value.tito_where[1] == Sine.forward.__code__.co_firstlineno
    with pytest.raises(AssertionError, match=r"^Sine\.backward: the gradient"):
        check_function(Sine, x)  # without the right output, central differences blame backward


def test_complete_names_a_wrong_forward_and_not_the_backward(project, cli, monkeypatch):
    shutil.copytree(PACKAGE_ROOT / "tests" / "02_activations", project / "tests" / "02_activations")
    folder = project / "workspace" / "02_activations"
    folder.mkdir(parents=True)
    path = slipped(2, [SOFTMAX_AXIS], folder)
    monkeypatch.setenv(
        "PYTEST_ADDOPTS", "-k 'softmax_backward_any_axis or (match_torch and softmax0)'"
    )
    result = cli("module", "complete", "2")
    assert result.exit_code == 1
    out = result.stdout
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 3, out  # the backward check, and the two shapes with an axis 0 of 2
    messages = [line.strip() for line in out.splitlines() if "is wrong:" in line]
    assert messages and all(
        m.startswith("AssertionError: SoftmaxFunction.forward: ") for m in messages
    )
    assert "backward is checked against the forward once it is right" in out
    assert "SoftmaxFunction.backward: the gradient" not in out and "Mismatched" not in out
    places = [line.strip()[3:] for line in out.splitlines() if line.strip().startswith("at ")]
    assert places
    for place in places:
        assert cell_text(path, place).strip() == "def forward(self, x, axis=-1):"
