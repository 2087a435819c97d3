"""`tito grade feedback N --diagnose`: each failed check on the feedback page says which operation
diverged and by how much, from a trace made in the grading sandbox; nothing of the reference or
the checks' code is on the page."""

import nbformat
from typer.testing import CliRunner

from tito.cli.main import app
from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import find
from tito.grading import gradebook
from tito.grading import nbgrader as grading

runner = CliRunner()
MODULE = 4
OLD = "loss = -np.sum(log_probs[keep]) / max(self.count, 1)"
NEW = "loss = -np.sum(log_probs[keep])"


def tito(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_feedback_pages_say_where_the_numbers_first_differ(tmp_path, released):
    module = find(MODULE)
    course = released(tmp_path / "course", MODULE)
    name = grading.notebook_file(module)
    source = nbformat.read(course / "source" / module.name / name, as_version=4)
    buggy = nbformat.from_dict(source)
    planted = [c for c in buggy.cells if OLD in c.source]
    assert len(planted) == 1
    planted[0].source = planted[0].source.replace(OLD, NEW)
    for student, nb in (("honest", source), ("slip", buggy)):
        target = course / "submitted" / student / module.name / name
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    assert tito("grade", "autograde", MODULE, "--course", course).exit_code == 0
    done = tito("grade", "feedback", MODULE, "--course", course, "--diagnose")
    assert done.exit_code == 0, done.output

    def page(student):
        return (course / "feedback" / student / module.name / f"{module.slug}.html").read_text()

    slip, honest = page("slip"), page("honest")
    assert "Where your numbers first differ from the reference" in slip
    assert "CrossEntropyFunction.forward" in slip and "a sum where a mean belongs" in slip
    assert "the submission, cell " in slip
    assert "every check has full marks" in honest and "likely:" not in honest
    # only the checks that cost points are diagnosed: a check with full marks gets no finding
    scores = gradebook.scores(course, module)
    points = scores.entries["slip"].cells
    lost = {gid for gid, top in scores.cells if points.get(gid, 0.0) < top}
    kept = {gid for gid, _ in scores.cells} - lost
    assert lost and kept
    listed = slip.split("tito-diagnosis", 1)[1]
    assert all(f"<code>{gid}</code>" in listed for gid in lost)
    assert not [gid for gid in kept if f"<code>{gid}</code>" in listed]
    # no line of the reference's solutions (that the slip does not share) or of the checks
    theirs = {line.strip() for c in buggy.cells for line in c.source.splitlines()}
    hidden = set()
    for cell in notebooks.read_source(paths.source(module)).cells:
        meta = cell.metadata.get("nbgrader", {})
        for line in cell.source.splitlines():
            if meta.get("grade") or line.strip() not in theirs:
                hidden.add(line.strip())
    diagnosis = slip.split("tito-diagnosis", 1)[1]
    assert not [line for line in hidden if len(line) > 12 and line in diagnosis]
    assert "<script" not in diagnosis.lower()


def test_a_large_modules_trace_comes_back_whole_from_the_sandbox():
    # module 13's four checks trace 3.8 MB of numbers and events: more than a check's output cap
    from tito.student.diagnose import explain, reference_trace, submission_trace

    module = find(13)
    source = notebooks.read_source(paths.source(module))
    old = "return self.linear2(self.gelu(self.linear1(x)))"
    slipped = [c for c in source.cells if old in c.source]
    assert len(slipped) == 1
    slipped[0].source = slipped[0].source.replace(old, "return self.linear2(self.linear1(x))")
    student, cells = submission_trace(module, source)
    result = explain(module, student, cells, reference_trace(module))
    first = result.findings[0]
    assert first.check == "test-mlp-block" and "LinearFunction.forward" in first.what, first
    assert first.place.startswith("the submission, cell ")
    assert "return self.linear2(self.linear1(x))" in first.place
