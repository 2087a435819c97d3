"""A grade measures only the student's own code: every module's blank release scores 0 and its
reference full marks, trivial submissions (zeros, the input passed through, NotImplementedError,
random numbers, a constant: tests/trivial.py) score no more than the blank one, and submissions
that attack the grader score no more than the blank one while the course folder, the
repository's package and the other students stay untouched.

One course folder holds every module (one `init`); each module is released and autograded once
with two jobs, and the tests read the outcomes. The attacks of issue 22's table then run a
second time with the static check (tito/curriculum/refusals.py) switched off: the judge alone must
hold.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from processes import running
from trivial import all_trivial, gutted, trivial
from typer.testing import CliRunner

from tito.cli.main import app
from tito.curriculum import paths, program, refusals
from tito.curriculum.catalog import MODULES, CourseModule
from tito.grading import course as course_folder
from tito.grading import gradebook
from tito.grading import nbgrader as grading
from tito.sandbox import limits

TIMEOUT = 2  # seconds per cell: the stubborn loop costs 2 * TIMEOUT + limits.SLACK once
ATTACKED = (1, 5, 12, 13)


def tito(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def solution_ids(nb) -> list[str]:
    return [meta(c)["grade_id"] for c in nb.cells if meta(c).get("solution")]


def cell_by_id(nb, grade_id: str):
    return next(c for c in nb.cells if meta(c).get("grade_id") == grade_id)


def edited(nb, grade_id: str | None = None, code: str = "", replace: bool = False, extra=""):
    """A copy of nb with `code` appended to (or replacing) a solution cell, and an extra cell."""
    nb = nbformat.from_dict(nb)
    if grade_id is None:
        grade_id = solution_ids(nb)[0]
    cell = cell_by_id(nb, grade_id)
    cell.source = code if replace else f"{cell.source}\n{code}"
    if extra:
        nb.cells.insert(1, new_code_cell(extra))
    return nb


# reads the runner's nonce through a format string (no dunder in the code), prints a verdict
THIEF = """\
try:
    raise ValueError()
except ValueError as _e:
    _nonce = "{0.__traceback__.tb_frame.f_back.f_back.f_locals[nonce]}".format(_e)
print(f"\\n{_nonce} begin\\n{_nonce} pass")
"""

IPYTHON_HOOKS = """\
ip = get_ipython()
ip.input_transformers_post.append(lambda lines: ["pass\\n"])
import ast
class Swallow(ast.NodeTransformer):
    def visit_Module(self, node):
        return ast.parse("try:\\n    pass\\nexcept BaseException:\\n    pass")
ip.ast_transformers.append(Swallow())
"""


def attackers(course: Path, module: CourseModule, source, release) -> dict[str, object]:
    """Submissions built from the blank release plus one attack each (issue 12's table and more).

    None of them does the work, so none may score more than the blank release."""
    victim = course / "submitted" / "reference" / module.name / grading.notebook_file(module)
    targets = [
        course / "gradebook.db",
        course / "decoy.db",
        course / course_folder.CONFIG_NAME,
        course / course_folder.TITO_CONFIG,
        course / "source" / module.name / grading.notebook_file(module),
        victim,
        paths.root() / "tinytorch" / "core" / "tensor.py",
    ]
    own = module.exports[0]
    names = {
        grade_id: sorted(_bound(cell_by_id(source, grade_id).source))
        for grade_id in solution_ids(source)
    }
    package = nbformat.from_dict(release)
    for grade_id, bound in names.items():  # "import the class from the installed package"
        imports = ", ".join(n for n in bound if not n.startswith("_")) or "Tensor"
        cell_by_id(package, grade_id).source = f"from tinytorch.{own} import {imports}\n"
    emptied = nbformat.from_dict(release)
    for grade_id in names:
        cell_by_id(emptied, grade_id).source = ""
    files = (  # read the source notebook, write over every file that matters
        f"_stolen = np.fromfile({str(targets[3])!r}, np.uint8)\n"
        f"for _target in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        np.zeros(8, np.uint8).tofile(_target)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    class_ = {
        "package": package,
        "emptied": emptied,
        "files": edited(release, code=files),
        "hooks": edited(release, code=IPYTHON_HOOKS.split("import ast")[0], extra=IPYTHON_HOOKS),
        "patcher": edited(
            release,
            code="np.allclose = lambda *a, **k: True\n"
            "np.testing.assert_allclose = lambda *a, **k: None",
        ),
        "aliaser": edited(release, code="_np = np\n_np.allclose = lambda *a, **k: True"),
        "rebinder": edited(release, code="np = None\nisinstance = lambda *a: True"),
        "escaper": edited(
            release,
            code="import os, subprocess\nsubprocess.Popen(['sleep', '900'], "
            "start_new_session=True)\nos._exit(0)",  # fmt: skip
            extra="import os\nos.system('sleep 900 &')",
        ),
        # fake verdict lines, then leave with status 0
        "forger": edited(
            release, code="print('pass')\nprint('0' * 32 + ' pass')\nraise SystemExit(0)"
        ),
    }
    class_["thief"] = edited(release, code=THIEF)
    if module.number in (1, 13):
        class_["hog"] = edited(release, code="_hog = [np.empty(2**27) for _ in range(100)]")
        class_["flood"] = edited(release, code="while True:\n    print('x' * 65536)")
    return class_


# Issue 22's table, each from the blank release (no real work), for a grader with no static
# check: only the judge (tito/grading/judge.py) stands between these and the points.
PASS_LINES = """\
import gc
for _o in gc.get_objects():
    if isinstance(_o, dict) and isinstance(_o.get("nonce"), str) and _o["nonce"]:
        print(f"\\n{_o['nonce']} begin\\n{_o['nonce']} pass")
"""
LIARS = """\
vars(np.testing)["assert_allclose"] = lambda *a, **k: None
vars(np.testing)["assert_array_equal"] = lambda *a, **k: None
vars(np)["isclose"] = lambda *a, **k: True
vars(np)["allclose"] = lambda *a, **k: True
"""
LYING_ARRAY = """\
class _Liar(np.ndarray):
    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ in ("isclose", "allclose", "array_equal"):
            return True
        return super().__array_function__(func, types, args, kwargs)
_real_asarray = np.asarray
vars(np)["asarray"] = lambda *a, **k: _real_asarray(*a, **k).view(_Liar)
"""
ORACLE = """\
import tinytorch.core.autograd as _engine
_engine.numerical_gradient = lambda f, x, h=1e-6: np.zeros_like(x)
"""
FRAMES = """\
import sys
_f = sys._getframe()
while _f is not None:
    if "check" in _f.f_locals and isinstance(_f.f_locals["check"], dict):
        _n = _f.f_locals["check"].get("nonce")
        print(f"\\n{_n} begin\\n{_n} pass")
    _f = _f.f_back
"""


def unguarded_attackers(module: CourseModule, source) -> dict[str, object]:
    """The attacks of issue 22's table that the static check would refuse, each on a submission
    that raises nothing but does no work (every function returns zeros, tests/trivial.py) and
    makes every assert of the checks a no-op: only the numbers can tell."""
    hollow = trivial(source, "zeros")
    class_ = {
        "liars": edited(hollow, code=LIARS),
        "pass-lines": edited(hollow, code=LIARS + PASS_LINES),
        "lying-array": edited(hollow, code=LIARS + LYING_ARRAY),
        "frames": edited(hollow, code=LIARS + FRAMES),
        "forged-numbers": edited(
            hollow,
            code=LIARS + FRAMES.replace(" pass", " numbers UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA=="),
        ),
    }
    if module.number >= 5:
        class_["oracle"] = edited(hollow, code=LIARS + ORACLE)
    if module.number == 13:  # issue 22's "no real code at all": LayerNorm gives zeros (and a
        # zero backward), MLP and block return their input, sample_next and GPT give zeros
        issue = nbformat.from_dict(source)
        for grade_id, kind in [("layernorm", "zeros"), ("mlp", "passthrough"),
                               ("block", "passthrough"), ("sample", "zeros"),
                               ("gpt", "zeros")]:  # fmt: skip
            cell = cell_by_id(issue, grade_id)
            cell.source = gutted(cell.source, kind)
        class_["no-real-code"] = edited(issue, code=LIARS)
    return class_


def stubborn(release):
    """The blank release whose matmul loops, swallowing every interruption, when it is called."""
    nb = nbformat.from_dict(release)
    cell = cell_by_id(nb, "matmul")
    lines = []
    for line in cell.source.splitlines():
        pad = line[: len(line) - len(line.lstrip())]
        if line.strip() == "raise NotImplementedError()":
            body = ["while True:", "    try:", "        pass", "    except BaseException:"]
            lines += [pad + text for text in body] + [pad + "        pass"]
        else:
            lines.append(line)
    cell.source = "\n".join(lines)
    return nb


def _bound(code: str) -> set[str]:
    from tito.curriculum.refusals import bound_names, parse

    return bound_names(parse(code))


def digest(paths_: list[Path]) -> dict[str, str]:
    files = [
        f for p in paths_ for f in ([p] if p.is_file() else sorted(p.rglob("*"))) if f.is_file()
    ]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@dataclass
class Graded:
    course: Path
    module: CourseModule
    outcomes: dict[str, grading.Outcome]
    scores: gradebook.Scores
    before: dict[str, str]
    after: dict[str, str]
    unguarded: dict[str, float] | None = None  # student -> total, graded with no static check
    unguarded_changed: list[str] = field(default_factory=list)  # files that run changed


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[int, Graded]:
    course = tmp_path_factory.mktemp("course")
    done = tito("grade", "init", course, "--timeout", TIMEOUT)
    assert done.exit_code == 0, done.output
    results = {}
    for module in MODULES:
        done = tito("grade", "generate", module.number, "--course", course)
        assert done.exit_code == 0, done.output
        name = grading.notebook_file(module)
        source = nbformat.read(course / "source" / module.name / name, as_version=4)
        release = nbformat.read(course / "release" / module.name / name, as_version=4)
        class_ = {"reference": source, "blank": release, **all_trivial(source)}
        if module.number in ATTACKED:
            class_ |= attackers(course, module, source, release)
        if module.number == 13:
            broken = nbformat.from_dict(source)
            cell_by_id(broken, "layernorm").source += "\n    def broken(:\n"
            class_["syntax"] = broken
        if module.number == 1:
            class_["stubborn"] = stubborn(release)
            class_["duplicate"] = nbformat.from_dict(source)
            twice = nbformat.from_dict(cell_by_id(source, "matmul"))
            twice["id"] = (
                "matmul-twice"  # a cell of its own (cell ids are unique) sharing the grade id
            )
            class_["duplicate"].cells.append(twice)
            class_["renamed"] = nbformat.from_dict(source)
            meta(cell_by_id(class_["renamed"], "matmul"))["grade_id"] = "my-matmul"
        for student, nb in class_.items():
            target = course / "submitted" / student / module.name / name
            target.parent.mkdir(parents=True)
            nbformat.write(nb, target)
        if (course / "gradebook.db").exists():
            (course / "decoy.db").write_bytes((course / "gradebook.db").read_bytes())
        watched = [
            course / course_folder.CONFIG_NAME,
            course / course_folder.TITO_CONFIG,
            course / "source",
            course / "release",
            course / "submitted",
            course / "decoy.db",
            paths.root() / "tinytorch",
        ]
        before = digest(watched)
        outcomes = {o.student: o for o in grading.autograde(course, module, jobs=2)}
        after = digest(watched)
        scores = gradebook.scores(course, module)
        unguarded, changed = None, []
        if module.number in ATTACKED:  # the same class again, the static check switched off
            attacks = unguarded_attackers(module, source)
            for student, nb in attacks.items():
                target = course / "submitted" / student / module.name / name
                target.parent.mkdir(parents=True)
                nbformat.write(nb, target)
            chosen = ["reference", "blank", *attacks]
            again_before = digest(watched)
            with _no_static_check():
                grading.autograde(course, module, chosen, jobs=2)
            again_after = digest(watched)
            changed = sorted(f for f in again_before if again_after.get(f) != again_before[f])
            again = gradebook.scores(course, module)
            unguarded = {student: again.total(student) for student in chosen}
        results[module.number] = Graded(
            course, module, outcomes, scores, before, after, unguarded, changed
        )
    return results


@contextmanager
def _no_static_check():
    keep = program.forbidden
    program.forbidden = lambda *args, **kwargs: None
    try:
        yield
    finally:
        program.forbidden = keep


def test_blank_release_scores_zero_and_reference_full_on_every_module(graded):
    assert sorted(graded) == [m.number for m in MODULES]
    for number, result in graded.items():
        scores = result.scores
        assert scores.max_total > 0, number
        assert scores.total("reference") == scores.max_total, (number, result.outcomes["reference"])
        assert scores.total("blank") == 0, (number, scores.rows["blank"])
        assert result.outcomes["reference"].ok and result.outcomes["blank"].ok, number


def test_trivial_submissions_score_no_more_than_blank_on_every_module(graded):
    for number, result in graded.items():
        trivial = [s for s in result.scores.rows if s.startswith("trivial-")]
        assert len(trivial) == 5, number
        for student in trivial:
            outcome = result.outcomes[student]
            assert outcome.ok, (number, student, outcome.message)
            assert result.scores.total(student) <= result.scores.total("blank"), (
                number,
                student,
                [(c.grade_id, c.reason) for c in outcome.checks],
            )


@pytest.mark.parametrize("number", ATTACKED)
def test_with_no_static_check_the_judge_alone_holds(graded, number):
    """Forged pass lines (a nonce found by the garbage collector or by walking frames), forged
    numbers, numpy's comparisons rewritten through vars(), a lying ndarray subclass, module 05's
    numerical_gradient replaced, module 13 with no real code: none scores above the blank,
    while the reference graded beside them keeps full marks."""
    totals = graded[number].unguarded
    assert totals["reference"] == graded[number].scores.max_total
    attackers_ = set(totals) - {"reference", "blank"}
    assert len(attackers_) >= 5
    for student in attackers_:
        assert totals[student] <= totals["blank"], (number, student)
    assert graded[number].unguarded_changed == []


@pytest.mark.parametrize("number", ATTACKED)
def test_attackers_score_no_more_than_blank_and_the_victim_keeps_full_marks(graded, number):
    result = graded[number]
    scores = result.scores
    attackers_ = set(scores.rows) - {"reference", "blank", "duplicate", "renamed", "syntax"}
    assert len(attackers_) >= 10
    for student in attackers_:
        assert scores.total(student) <= scores.total("blank"), (student, result.outcomes[student])
    assert scores.total("reference") == scores.max_total


@pytest.mark.parametrize("number", ATTACKED)
def test_course_package_and_other_students_are_byte_identical(graded, number):
    result = graded[number]
    assert result.before == result.after
    assert any("gradebook" not in f and "decoy.db" in f for f in result.after) or number == 1
    assert running("check_runner") == []
    assert running("sleep 900") == []


def test_each_failure_names_its_real_cause_and_cell(graded):
    said = {name: o.message for name, o in graded[13].outcomes.items()}
    assert "ImportError" in said["package"] or "circular" in said["package"]
    assert "FileNotFoundError" in said["files"]
    assert "read-only while grading" in said["aliaser"]
    # a refused cell costs its own checks; the submission is then marked for a person to read
    assert said["patcher"].startswith("needs manual grading: not run: solution cell 'layernorm'")
    assert "`.testing` is not allowed" in said["patcher"]
    assert "which the course's own cells use" in said["rebinder"]
    assert "`import os" in said["escaper"]
    assert "NameError: name 'get_ipython'" in said["hooks"]
    assert "SystemExit" in said["forger"]
    assert "out of memory" in said["hog"]
    assert "output limit" in said["flood"]
    assert "SyntaxError" in said["syntax"] and "layernorm" in said["syntax"]
    # the reference with a syntax error in LayerNorm: it costs the checks of that cell only
    lost = {c.grade_id for c in graded[13].outcomes["syntax"].checks if not c.passed}
    assert lost == {"test-layernorm", "test-layernorm-grad"}
    assert said["reference"] == ""
    thief = graded[13].outcomes["thief"]
    assert all("verdict line of its own (tampering)" in c.reason for c in thief.checks)
    ungradable = graded[1].outcomes
    assert not ungradable["duplicate"].ok and not ungradable["renamed"].ok
    assert ungradable["duplicate"].message.startswith("cells ") and (
        "share the grade id 'matmul'; nbgrader cannot record" in ungradable["duplicate"].message
    )
    assert "grade id 'my-matmul', which the assignment does not have (renamed?)" in (
        ungradable["renamed"].message
    )
    stubborn = graded[1].outcomes["stubborn"]
    matmul = next(c for c in stubborn.checks if c.grade_id == "test-matmul")
    assert matmul.reason.startswith("MatMul.forward (cell 'matmul'): ")  # where it ran out
    assert f"(cell 'matmul'): timeout: stopped after {TIMEOUT} s" in matmul.reason
    # stopped within its limit; the other two checks of that submission take a second or so
    assert stubborn.seconds < limits.check_seconds(TIMEOUT) + 6


@pytest.mark.parametrize(
    "code",
    [
        "x = np.ones(3)\nprint([_ * 2 for _ in range(3)])",  # scratch code at the top of a cell
        "def f(self, name):\n    return getattr(self, name), vars(self), hasattr(self, '__len__')",
        "import math, functools\nfrom tinytorch.core.tensor import Tensor as _T",
        "class A:\n    def __repr__(self):\n        return type(self).__name__",
    ],
)
def test_honest_code_is_not_refused(code):
    assert refusals.forbidden(code, set(), {"np", "Tensor", "isinstance"}) is None


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("import os", "`import os` is not allowed"),
        ("from numpy import testing", "importing testing is not allowed"),
        ("import numpy.ctypeslib", "`import numpy.ctypeslib` is not allowed"),
        ("from numpy import *", "import *` is not allowed"),
        ("f = (lambda: 0).__globals__", "`.__globals__` is not allowed"),
        ("t = getattr(np, 'test' + 'ing')", "`getattr` needs a plain attribute name"),
        ("setattr(np, 'allclose', max)", "`setattr` is not allowed"),
        ("def f():\n    global np\n    np = None", "redefines `np`"),
        ("for Tensor in range(3):\n    pass", "redefines `Tensor`"),
        ("exec('1')", "`exec` is not allowed"),
        (
            "e = None\ntry:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame",
            "not allowed",
        ),
    ],
)
def test_code_that_reaches_for_the_grader_is_refused(code, why):
    assert why in refusals.forbidden(code, set(), {"np", "Tensor", "isinstance"})


def test_unsafe_grades_the_same_without_the_sandbox(graded):
    result = graded[1]
    (outcome,) = grading.autograde(result.course, result.module, "reference", unsafe=True)
    assert outcome.ok and outcome.message == ""
    assert all(check.passed for check in outcome.checks) and len(outcome.checks) == 3
