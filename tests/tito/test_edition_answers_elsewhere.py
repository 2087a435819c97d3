"""The student edition's leak check sees a solution line held as a string, and one written out in
product code built on the module (a later lesson, a given file whose GIVEN_REQUIRES reach it); no
file the edition ships besides a lesson and its exports holds a line of module 16's, 17's or 20's
solutions, and no product code built on a module spells out a line of its solution."""

import re

import pytest

from tito.curriculum.catalog import GIVEN_REQUIRES, MODULES, closure, find
from tito.curriculum.paths import PACKAGE_ROOT
from tito.grading import edition

# a header shared with a solution (`if mask is not None:`, a signature) answers nothing
HEADER = re.compile(r"^(if|elif|for|while|with|def) .*:$")


def solution_lines(number: int) -> set[str]:
    inside, found = False, set()
    for line in (PACKAGE_ROOT / find(number).source).read_text(encoding="utf-8").splitlines():
        marker = line.strip()
        if marker.startswith(("### BEGIN", "### END")):
            inside = marker.startswith("### BEGIN")
        elif inside and len(edition._normal(line)) >= edition.MIN_SECRET:
            found.add(edition._normal(line))
    return found


def test_a_solution_line_is_found_whole_or_between_quotes(tmp_path):
    secret = {"cols = np.concatenate([a, b])"}
    (tmp_path / "a.py").write_text(
        "    cols = np.concatenate([a, b])\n"  # written out
        'PAIRS = [("        cols = np.concatenate([a, b])", "x")]\n'  # a string in a test
        "text = 'cols = np.concatenate([a, b])  # the columns'\n"  # with its comment
        "other = np.concatenate([a, b])\n",  # not the line
        encoding="utf-8",
    )
    (tmp_path / "b.md").write_text("Write `cols = np.concatenate([a, b])` here.\n", "utf-8")
    found = edition.leaks(tmp_path, secret)
    assert [f.split(":")[0] for f in found] == ["a.py", "a.py", "a.py", "b.md"]


def test_a_quoted_solution_line_in_a_hand_written_file_stays_secret(tmp_path):
    line = sorted(solution_lines(20), key=len)[-1]  # the longest, no shared idiom
    quoted = tmp_path / "quoted.py"
    quoted.write_text(f"EDITS = [{line!r}]\n", encoding="utf-8")
    written = tmp_path / "written.py"
    written.write_text(f"def f():\n    {line}\n", encoding="utf-8")
    stubbed = [find(20)]
    assert line in edition.secrets(stubbed, PACKAGE_ROOT, [str(quoted)])
    assert line not in edition.secrets(stubbed, PACKAGE_ROOT, [str(written)])  # a coincidence


def test_a_solution_line_in_given_code_built_on_the_module_is_secret(tmp_path, monkeypatch):
    """Module 18's given AdamW once wrote out module 06's decay lines: given code that builds on
    a module (its GIVEN_REQUIRES reach it) spelling one of its lines gives the answer away;
    given code that does not build on it shares the line by coincidence."""
    line = "p.data *= 1.0 - self.lr * self.weight_decay"
    assert line in solution_lines(6)
    given = tmp_path / "fast.py"
    given.write_text(f"def step(self, p):\n    {line}\n", encoding="utf-8")
    for requires, secret in [((18,), True), ((6,), True), ((8,), False), ((), False)]:
        monkeypatch.setitem(GIVEN_REQUIRES, str(given), requires)
        assert (line in edition.secrets([find(6)], PACKAGE_ROOT, [])) is secret, requires
        if secret:
            assert edition.leaks(tmp_path, edition.secrets([find(6)], PACKAGE_ROOT, [])) == [
                f"fast.py: {line}"
            ]


def shipped_given_parts() -> dict[str, str]:
    """Every lesson's released text and exports with its solutions stubbed: what a lesson
    ships of itself however it is published (its own answers aside)."""
    texts = {}
    for module in MODULES:
        text, files = edition._stubbed_source(module, PACKAGE_ROOT)
        texts[module.source.as_posix()] = text
        texts.update({path.as_posix(): body for path, body in files.items()})
    return texts


@pytest.mark.parametrize("number", [16, 17, 20])
def test_no_shipped_file_but_the_lesson_holds_a_solution_line(number):
    secret = solution_lines(number)
    own = {find(number).source.as_posix()}
    own |= {p.as_posix() for p in find(number).package_files()}
    given = shipped_given_parts()
    found = []
    for name in sorted(set(edition._tracked(PACKAGE_ROOT)) | set(given)):
        if name in own or name.startswith(edition.LEFT_OUT):
            continue
        try:
            text = given.get(name) or (PACKAGE_ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for line in text.splitlines():
            whole = edition._normal(line)
            quoted = edition._spoken(line) - {whole}
            if quoted & secret or (whole in secret and not HEADER.match(whole)):
                found.append(f"{name}: {line.strip()}")
    assert not found, found


def test_module_09s_given_code_does_not_spell_out_its_solutions():
    """Pooling's given scatter once repeated col2im's loop line for line; it now calls col2im."""
    secret = solution_lines(9)
    released, _ = edition._stubbed_source(find(9), PACKAGE_ROOT)
    repeated = {edition._normal(line) for line in released.splitlines()} & secret
    # a header or the first line of a call continued below answers nothing
    assert {line for line in repeated if not (HEADER.match(line) or line.endswith("("))} == set()


@pytest.fixture(scope="module")
def released():
    return shipped_given_parts()


def built_on(module) -> list[str]:
    """The product code that builds on `module`: its dependents' lessons and package files, and
    the given files whose GIVEN_REQUIRES reach it."""
    names = [
        path.as_posix()
        for other in MODULES
        if module in closure(other)
        for path in [other.source, *other.package_files()]
    ]
    return names + [name for name, needs in GIVEN_REQUIRES.items() if module in closure(needs)]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_no_product_code_built_on_a_module_spells_out_its_solution(module, released):
    """With every lesson stubbed (the edition that publishes nothing), no later lesson and no
    given file that builds on the module holds a line of its solution, unless the line answers
    nothing on its own (a header, the opening of a call) or edition.SHARED names it."""
    own = {edition._normal(line) for line in released[module.source.as_posix()].splitlines()}
    for path in module.package_files():
        own |= {edition._normal(line) for line in released[path.as_posix()].splitlines()}
    secret = {
        line
        for line in solution_lines(module.number) - own - set(edition.SHARED.get(module.number, {}))
        if not (HEADER.match(line) or line.endswith("("))
    }
    found = []
    for name in built_on(module):
        text = released.get(name) or (PACKAGE_ROOT / name).read_text(encoding="utf-8")
        found += [
            f"{name}: {line.strip()}"
            for line in text.splitlines()
            if edition._spoken(line) & secret
        ]
    assert not found, found


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_an_edition_that_holds_back_one_module_holds_no_line_of_it(module):
    """Publishing every module but one (a later one ahead of one it builds on) ships the later
    lessons with their solutions: none of them may spell out a line of the one held back."""
    secret = edition.secrets([module], PACKAGE_ROOT)
    assert edition.leaks_in(edition.contents([module], PACKAGE_ROOT), secret) == []
