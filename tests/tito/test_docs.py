"""The maintainer docs stay true: every path they name exists, every API signature is current."""

import importlib
import inspect
import re

import pytest

from tito.curriculum.paths import PACKAGE_ROOT

DOCS = sorted((PACKAGE_ROOT / "docs").glob("*.md")) + [PACKAGE_ROOT / "data" / "README.md"]
# every page names repository paths from the top (`tito/...`); a path inside an instructor's
# course folder is written `course/...` (docs/instructor.md), which this test leaves alone
TOP = ("tito/", "tinytorch/", "modules/", "tests/", "milestones/", "benchmarks/", "docs/", "data/")
PLACEHOLDERS = ("NN", "NAME")  # modules/NN_slug/slug.py and the like name a pattern, not a file


def named_paths(text: str) -> list[str]:
    spans = re.findall(r"`([^`\s]+)`", text)
    paths = [s for s in spans if s.startswith(TOP) or s in ("pyproject.toml", "README.md")]
    return [p for p in paths if not any(mark in p for mark in PLACEHOLDERS)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_named_path_exists(doc):
    text = doc.read_text(encoding="utf-8")
    assert "../shared" not in text
    paths = named_paths(text)
    assert [p for p in paths if not (PACKAGE_ROOT / p).exists()] == []
    if doc.name == "DESIGN.md":
        assert len(paths) > 30  # the design page names the files it describes


def shown(signature: inspect.Signature) -> str:
    """A signature as CONVENTIONS.md writes it: no self, no annotations."""
    parts, star = [], False
    for param in signature.parameters.values():
        if param.name == "self":
            continue
        if param.kind is param.KEYWORD_ONLY and not star:
            parts.append("*")
        star = star or param.kind in (param.VAR_POSITIONAL, param.KEYWORD_ONLY)
        parts.append(str(param.replace(annotation=param.empty)))
    return ", ".join(parts)


def documented_signatures() -> list[tuple[str, str, str]]:
    module, found = None, []
    text = (PACKAGE_ROOT / "docs" / "CONVENTIONS.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        heading = re.match(r"### \d\d `(tinytorch[\w.]*)`", line)
        if heading:
            module = heading.group(1)
        call = re.match(r"- `([A-Za-z_][\w.]*)\((.*?)\)`", line)
        if module and call:
            found.append((module, call.group(1), call.group(2)))
    return found


SIGNATURES = documented_signatures()


def test_conventions_list_the_shared_apis():
    assert len(SIGNATURES) > 30


@pytest.mark.parametrize(("module", "name", "params"), SIGNATURES, ids=lambda v: str(v))
def test_documented_signature_is_the_packages(module, name, params):
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    assert shown(inspect.signature(inspect.unwrap(obj))) == params


def test_the_design_page_names_every_given_file():
    from tito.curriculum.catalog import GIVEN

    text = (PACKAGE_ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    section = text.split("## Lessons and given files", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(tinytorch/[^`]+\.py)`", section))
    assert named == set(GIVEN)
