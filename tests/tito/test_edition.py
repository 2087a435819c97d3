"""The student edition: no line of an unpublished solution anywhere in it (git objects
included), and a student's whole loop for module 08 works in it."""

import json
import re
import subprocess

import nbformat
import pytest

from tito.curriculum import exporter, notebooks
from tito.curriculum.catalog import MODULES, find
from tito.curriculum.paths import PACKAGE_ROOT
from tito.grading import edition

PUBLISHED = [m for m in MODULES if m.number <= 7]
UNPUBLISHED = [m for m in MODULES if m.number > 7]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("edition") / "course"
    return edition.build(out, edition.parse_published("01-07"), root=PACKAGE_ROOT)


def normal(line: str) -> str:
    return re.sub(r"\s+", " ", line.split(" #")[0]).strip()


def solution_lines(module) -> set[str]:
    """The normalised lines inside the module's solution regions, and of its committed
    reference package files, at least 16 characters long."""
    found, inside = set(), False
    for line in (PACKAGE_ROOT / module.source).read_text().splitlines():
        if line.strip() == notebooks.BEGIN_SOLUTION:
            inside = True
        elif line.strip() == notebooks.END_SOLUTION:
            inside = False
        elif inside:
            found.add(normal(line))
    for path in module.package_files():
        found.update(normal(line) for line in (PACKAGE_ROOT / path).read_text().splitlines())
    return {line for line in found if len(line) >= 16}


def given_lines() -> set[str]:
    """Lines the edition rightly holds: the release of every module (its stubbed notebook)
    and its export, the published references, and every hand-written file of the repository."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=PACKAGE_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    derived = {m.source.as_posix() for m in MODULES}
    derived |= {p.as_posix() for m in UNPUBLISHED for p in m.package_files()}
    lines = set()
    for name in tracked:
        if name in derived or name.startswith(edition.LEFT_OUT) or name.endswith(".gz"):
            continue
        text = (PACKAGE_ROOT / name).read_text(encoding="utf-8", errors="replace")
        lines.update(normal(line) for line in text.splitlines())
    for module in MODULES:
        release = notebooks.student_notebook(module, PACKAGE_ROOT / module.source)
        for cell in release.cells:
            lines.update(normal(line) for line in cell.source.splitlines())
        for text in exporter.render(release, module, module.source.as_posix()).values():
            lines.update(normal(line) for line in text.splitlines())  # the stubs' package
    for module in PUBLISHED:
        source = (PACKAGE_ROOT / module.source).read_text()
        lines.update(normal(line) for line in source.splitlines())
        for path in module.package_files():
            lines.update(normal(line) for line in (PACKAGE_ROOT / path).read_text().splitlines())
    return lines


def git_objects(folder) -> list[str]:
    """The text of every object in the repository's object store."""
    raw = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=folder,
        capture_output=True,
        check=True,
    ).stdout
    texts, at = [], 0
    while at < len(raw):
        end = raw.index(b"\n", at)
        _, _, size = raw[at:end].split()
        body = raw[end + 1 : end + 1 + int(size)]
        texts.append(body.decode("utf-8", errors="replace"))
        at = end + 1 + int(size) + 1
    return texts


def test_the_edition_holds_no_line_of_an_unpublished_solution(made):
    given = given_lines()
    secret = set().union(*(solution_lines(m) for m in UNPUBLISHED)) - given
    assert len(secret) > 300  # the check has something to find: each module's own lines

    texts = {}
    for path in made.folder.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(made.folder).parts:
            texts[path.relative_to(made.folder).as_posix()] = path.read_bytes().decode(
                "utf-8", errors="replace"
            )
    objects = git_objects(made.folder)
    assert len(objects) > len(texts)  # blobs, trees and the commit
    found = [
        (where, line.strip())
        for where, text in [*texts.items(), *(("git object", t) for t in objects)]
        for line in text.splitlines()
        if normal(line) in secret
    ]
    assert found == []

    # what makes the search worth something: a solution line planted in a copy is found
    planted = next(iter(sorted(secret)))
    (made.folder / "docs" / "planted.md").write_text(f"    {planted}  # a comment\n")
    try:
        assert edition.leaks(made.folder, edition.secrets(UNPUBLISHED, PACKAGE_ROOT)) == [
            f"docs/planted.md: {planted}  # a comment"
        ]
    finally:
        (made.folder / "docs" / "planted.md").unlink()


def test_the_edition_is_one_commit_with_published_references_and_stubs_for_the_rest(made):
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=made.folder, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert log == ["Student edition: reference published for modules 01, 02, 03, 04, 05, 06, 07"]
    manifest = json.loads((made.folder / "edition.json").read_text())
    assert manifest["published"] == [m.name for m in PUBLISHED]
    for module in PUBLISHED:  # the reference, as in the full repository
        assert (made.folder / module.source).read_bytes() == (
            PACKAGE_ROOT / module.source
        ).read_bytes()
        for path in module.package_files():
            assert (made.folder / path).read_bytes() == (PACKAGE_ROOT / path).read_bytes()
    loader = (made.folder / "tinytorch" / "data" / "loader.py").read_text()
    assert 'raise NotImplementedError("module 08 dataloader: write this part")' in loader
    assert notebooks.BEGIN_SOLUTION not in (made.folder / find("08").source).read_text()
    assert not (made.folder / "tests" / "tito").exists()  # tito's own tests grade the reference


def test_a_student_completes_module_08_in_the_edition(made, cli, monkeypatch):
    monkeypatch.setenv("TITO_ROOT", str(made.folder))
    monkeypatch.setenv("TITO_DEBUG", "0")
    module = find("08")
    assert cli("module", "open", "8").exit_code == 0
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")
    stubbed = cli("module", "complete", "8")
    monkeypatch.delenv("PYTEST_ADDOPTS")
    assert stubbed.exit_code == 1 and "not recorded" in stubbed.output

    before = cli("milestone", "run", "mlp", "--quick")  # needs 01-08: 08 holds stubs still
    assert before.exit_code == 1 and "08_dataloader" in before.output

    diagnosed = cli("diagnose", "8")
    assert diagnosed.exit_code == 1
    assert "does not hold" in diagnosed.output and "grade feedback 8 --diagnose" in diagnosed.output

    # the student's filled notebook: the full repository's reference of module 08
    filled = notebooks.read_source(PACKAGE_ROOT / module.source)
    nbformat.write(filled, made.folder / "workspace" / module.name / f"{module.slug}.ipynb")
    done = cli("module", "complete", "8")
    assert done.exit_code == 0, done.output
    progress = json.loads((made.folder / ".tito" / "progress.json").read_text())
    assert progress["completed"]["8"]["failed"] == 0 and progress["completed"]["8"]["passed"] > 0
    tested = cli("test", "8")
    assert tested.exit_code == 0, tested.output
    mlp = cli("milestone", "run", "mlp", "--quick")  # 01-07 published, 08 the student's
    assert mlp.exit_code == 0, mlp.output
    status = cli("module", "status")
    assert status.exit_code == 0
    assert re.search(r"08 .*dataloader.*complete", status.output), status.output

    # the notebook and the progress are the student's, untracked: a pull never touches them
    changed = subprocess.run(
        ["git", "status", "--porcelain"],
        cwd=made.folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert changed == [" M tinytorch/data/loader.py"]


def test_published_lists_read_as_modules():
    numbers = lambda spec: [m.number for m in edition.parse_published(spec)]  # noqa: E731
    assert numbers("01-07") == [1, 2, 3, 4, 5, 6, 7]
    assert numbers("1,3,5-6") == [1, 3, 5, 6]
    assert numbers("transformers,2") == [2, 13]
    assert numbers("") == [] and numbers("none") == []
    assert numbers("all") == [m.number for m in MODULES]
    for bad, said in [("7-1", "runs backwards"), ("1-2-3", "cannot read"), ("42", "no module 42")]:
        with pytest.raises(edition.TitoError, match=said):
            edition.parse_published(bad)


def test_a_leaking_edition_is_refused_and_nothing_committed(tmp_path, monkeypatch):
    readme = (PACKAGE_ROOT / "README.md").read_text().splitlines()
    line = next(x for x in readme if len(x.strip()) > 40)
    monkeypatch.setattr(edition, "secrets", lambda *args: {normal(line)})
    with pytest.raises(edition.TitoError, match=r"would hold \d+ line"):
        edition.build(tmp_path / "out", [], root=PACKAGE_ROOT)
    assert not (tmp_path / "out" / ".git").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(edition.TitoError, match="not a student edition"):
        edition.build(tmp_path / "busy", [], root=PACKAGE_ROOT)
    with pytest.raises(edition.TitoError, match="inside the course repository"):
        edition.build(PACKAGE_ROOT / "workspace" / "edition", [], root=PACKAGE_ROOT)
