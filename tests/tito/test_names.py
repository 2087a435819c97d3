"""The one name table (tinytorch/names.py): every listed name imports from its home and from
every path it is promised at, as the same object, and the table agrees with tito's catalog."""

import importlib
import json
import shutil
import subprocess
import sys

import pytest

from tinytorch import names
from tito.curriculum.catalog import GIVEN, MODULES
from tito.curriculum.exporter import course_map
from tito.curriculum.paths import PACKAGE_ROOT

PROMISES = [
    (name, f"tinytorch.{where}", path)
    for where, listed, paths in names.TABLE
    for name in listed
    for path in paths
]


@pytest.mark.parametrize("name,home,path", PROMISES, ids=lambda v: str(v))
def test_every_name_imports_from_every_path_it_is_promised_at(name, home, path):
    defined = getattr(importlib.import_module(home), name)
    namespace = {}
    exec(f"from {path} import {name}", namespace)  # the way a user writes it
    assert namespace[name] is defined
    assert getattr(importlib.import_module(path), name) is defined  # and as an attribute
    assert name in dir(importlib.import_module(path))
    assert name in importlib.import_module(path).__all__
    if isinstance(defined, type) or callable(defined):
        assert getattr(defined, "__module__", home) == home, f"{name} is defined in {home}"


def test_the_names_the_review_found_broken_resolve():
    import tinytorch.nn as nn
    from tinytorch.models.seq2seq import DecoderBlock, TransformerEncoder

    assert nn.DecoderBlock is DecoderBlock and nn.TransformerEncoder is TransformerEncoder


def test_an_unlisted_name_is_an_attribute_error():
    import tinytorch.nn as nn

    with pytest.raises(AttributeError, match="has no attribute 'Conv9d'"):
        nn.Conv9d  # noqa: B018


def test_the_course_numbers_are_the_catalogs():
    from_catalog = {dotted: f"{m.number:02d} {m.slug}" for m in MODULES for dotted in m.exports}
    assert names.course() == from_catalog == json.loads(course_map())


def test_every_home_is_a_course_export_or_a_given_file():
    for where, _, _ in names.TABLE:
        file = "tinytorch/" + where.replace(".", "/") + ".py"
        assert where in names.course() or file in GIVEN, where
    for file in GIVEN:
        assert (PACKAGE_ROOT / file).is_file(), file


def test_a_given_path_without_its_course_module_names_the_module_to_complete(tmp_path):
    package = tmp_path / "tinytorch"
    shutil.copytree(
        PACKAGE_ROOT / "tinytorch", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    keep = {package / "core" / "tensor.py", *(tmp_path / f for f in GIVEN)}
    for path in package.rglob("*.py"):
        if path.name != "__init__.py" and path not in keep:
            path.unlink()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import tinytorch.core.transformer as t; "
        "print(t.__all__[0]); t.Seq2SeqTransformer"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path
    )
    last = result.stderr.strip().splitlines()[-1]
    assert result.stdout.strip() == "DecoderBlock"
    assert last.startswith("ImportError: tinytorch.core.transformer.Seq2SeqTransformer comes from")
    assert "course module 12 attention" in last and "tito module complete 12" in last
