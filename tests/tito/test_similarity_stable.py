"""Similarity scores are the same in every run, and a short module does not flag an honest
student for the few lines its lesson all but dictates (docs/instructor.md section 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tito.curriculum import paths
from tito.curriculum.catalog import find
from tito.curriculum.notebooks import read_source
from tito.grading import similarity

CLASS = Path(__file__).with_name("similarity_class.py")

# the module-13 class (tests/tito/similarity_class.py), compared in a fresh process
SCORES = textwrap.dedent(
    f"""
    import importlib.util, json
    from tito.grading import similarity
    spec = importlib.util.spec_from_file_location("similarity_class", {str(CLASS)!r})
    klass = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(klass)
    made, _ = klass.students()
    cells = {{name: dict(zip(klass.REGIONS, regions)) for name, regions in made.items()}}
    release = similarity.Release(klass.MODULE).code
    pairs, _, _ = similarity.compare(cells, release, similarity.Settings())
    print(json.dumps([[p.a, p.b, p.score, p.shared, p.slices_a] for p in pairs]))
    """
)


def scores(seed: str) -> list:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    done = subprocess.run(
        [sys.executable, "-c", SCORES], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_same_class_scores_the_same_under_any_hash_seed():
    """copydetect hashes k-grams with Python's salted hash(): winnowing kept other fingerprints
    in every process, and module 02's honest pair scored 0.29 in one run, 0.37 in another."""
    first, second = scores("1"), scores("2")
    assert len(first) > 100
    assert first == second


# module 02, whose solution is 46 short lines: an honest student who writes the idioms the
# lesson leads to (e^-|x| for sigmoid, the saved output in backward, a max-shifted softmax)
HONEST_02 = {
    "pointwise": [
        "self.pos = x > 0\nreturn np.where(self.pos, x, 0.0).astype(x.dtype)",
        "return (grad * self.pos,)",
        "e = np.exp(-np.abs(x))\nself.out = np.where(x >= 0, 1 / (1 + e), e / (1 + e))\n"
        "return self.out",
        "return (grad * self.out * (1 - self.out),)",
        "self.out = np.tanh(x)\nreturn self.out",
        "return (grad * (1 - self.out**2),)",
    ],
    "gelu": [
        "c = np.sqrt(2.0 / np.pi)\nself.x = x\nself.th = np.tanh(c * (x + 0.044715 * x**3))\n"
        "return 0.5 * x * (1.0 + self.th)",
        "c = np.sqrt(2.0 / np.pi)\nx, th = self.x, self.th\n"
        "inner = c * (1.0 + 3 * 0.044715 * x**2)\n"
        "return (grad * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th**2) * inner),)",
    ],
    "softmax": [
        "top = np.max(x, axis=self.axis, keepdims=True)\ntop[np.isneginf(top)] = 0\n"
        "ex = np.exp(x - top)\nden = np.sum(ex, axis=self.axis, keepdims=True)\n"
        "self.y = ex / np.where(den == 0, 1, den)\nreturn self.y",
        "y = self.y\ninner = np.sum(grad * y, axis=self.axis, keepdims=True)\n"
        "return (y * (grad - inner),)",
    ],
}


def own_code(release: similarity.Release, bodies: dict[str, list[str]]) -> dict[str, str]:
    """The own code of a notebook whose stubs hold `bodies`, as similarity.run takes it."""
    written = {}
    for grade_id, cell in release.cells.items():
        lines, pending = [], list(bodies[grade_id])
        for line in cell.splitlines():
            if line.strip().startswith("raise NotImplementedError"):
                indent = line[: len(line) - len(line.lstrip())]
                lines += [indent + body for body in pending.pop(0).splitlines()]
            elif not line.strip().startswith("# TODO: your code here"):
                lines.append(line)
        assert not pending
        written[grade_id] = similarity._added(cell, "\n".join(lines), release.lines)
    return written


def test_a_short_module_flags_copies_and_not_the_dictated_idioms():
    module = find("02")
    release = similarity.Release(module)
    reference = release.own(read_source(paths.source(module)))
    honest = own_code(release, HONEST_02)
    copied = dict(honest, softmax=reference["softmax"])  # one cell of three from the solution
    alone = {"pointwise": reference["pointwise"], "gelu": "", "softmax": ""}  # all copied
    cells = {"(reference)": reference, "honest": honest, "copied": copied, "alone": alone}
    pairs, short, _ = similarity.compare(cells, release.code, similarity.Settings())
    score = {(p.a, p.b): p for p in pairs}
    dictated = score[("(reference)", "honest")]
    # a third of this honest submission is in the solution: the share alone would flag it
    assert dictated.score >= similarity.THRESHOLD and dictated.shared < similarity.LEAST
    assert not similarity.Settings().flags(dictated)
    assert similarity.Settings(least=0).flags(dictated)
    taken = score[("(reference)", "copied")]
    assert taken.shared >= similarity.LEAST and similarity.Settings().flags(taken)
    small = score[("(reference)", "alone")]  # little code, but every character of it taken
    assert small.shared < similarity.LEAST and similarity.Settings().flags(small)
    assert short == []
