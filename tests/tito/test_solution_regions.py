"""What a student writes in modules 01-13 is the plain lesson: each solution region (between
`### BEGIN SOLUTION` and `### END SOLUTION`) holds the formula, not a fast version of it.

The speed lives in the optimization tier (module 17 memoization, 18 acceleration), whose tests
check each fast kernel against the plain lesson code. The rules below name what a lesson's region
may not contain; each has a planted example that must be caught and a plain one that must not.
"""

import re

import pytest

from tito.curriculum import notebooks, paths
from tito.curriculum.catalog import MODULES

FIRST_OPTIMIZATION_MODULE = (
    14  # modules 14-20 are the optimization tier (tito/curriculum/catalog.py PLANNED)
)
LESSONS = [m for m in MODULES if m.number < FIRST_OPTIMIZATION_MODULE]

# rule -> (pattern, what it catches, a line it must catch, a plain line it must let through)
RULES = {
    "out= buffer": (
        r"[(,]\s*out=(?!=)",  # a keyword argument (ruff writes no spaces), not `out = ...`
        "an output buffer passed to a numpy call (np.exp(x, out=x))",
        "np.exp(scores, out=scores)",
        "out = weights @ v",
    ),
    "contiguous copy": (
        r"ascontiguousarray|asfortranarray|\.flags\b",
        "a memory-layout copy for BLAS",
        "out = np.ascontiguousarray(heads.transpose(0, 1, 3, 2, 4))",
        "heads = x.reshape(batch, steps, h, d).permute(0, 2, 1, 3)",
    ),
    "strided view": (
        r"as_strided|\.strides\b|stride_tricks",
        "a hand-made strided view",
        "windows = np.lib.stride_tricks.as_strided(x, shape, strides)",
        "windows = x[:, i : i + k]",
    ),
    "einsum optimize": (
        r"einsum\([^\n]*optimize",
        "an einsum contraction-order search",
        "y = np.einsum('bij,bjk->bik', a, b, optimize=True)",
        "y = a @ b",
    ),
    "preallocated buffer": (
        r"np\.empty(_like)?\(",
        "uninitialised memory filled in place",
        "y = np.empty((n, rows, cols), dtype=x.dtype)",
        "m = np.zeros_like(p.data)",
    ),
    "reciprocal trick": (
        r"np\.reciprocal\(",
        "multiplying by a reciprocal instead of dividing",
        "scale = np.reciprocal(total)",
        "weights = e / total",
    ),
    "threads or processes": (
        r"\b(threading|concurrent\.futures|ThreadPoolExecutor|multiprocessing|threadpoolctl)\b",
        "parallel workers",
        "with ThreadPoolExecutor(2) as pool:",
        "for x, y in loader:",
    ),
    "foreign code": (
        r"\b(ctypes|cffi|numba|cython)\b",
        "calls into compiled code",
        "lib = ctypes.CDLL('libopenblas.so')",
        "y = x @ w",
    ),
    "side-channel output": (
        r"\b\w+_out\b",
        "a second result smuggled out through an argument (weights_out.append(w))",
        "weights_out.append(weights)",
        "return out, weights",
    ),
    "fused-kernel helper": (
        r"\b(mean_last|sum_leading|_scratch|_workspace)\b",
        "reductions or workspaces written for speed instead of the formula",
        "centred = x - mean_last(x)",
        "mean = x.mean(axis=-1, keepdims=True)",
    ),
}


def regions(text: str) -> list[str]:
    """The code between BEGIN and END SOLUTION markers of one cell, region by region."""
    found = re.findall(
        re.escape(notebooks.BEGIN_SOLUTION) + r"(.*?)" + re.escape(notebooks.END_SOLUTION),
        text,
        flags=re.DOTALL,
    )
    return [re.sub(r"(?m)#.*$", "", body) for body in found]  # comments may name anything


def offences(text: str) -> list[str]:
    """'rule: line' for every line of a solution region that breaks a rule."""
    found = []
    for body in regions(text):
        for line in body.splitlines():
            for rule, (pattern, *_rest) in RULES.items():
                if re.search(pattern, line):
                    found.append(f"{rule}: {line.strip()}")
    return found


def _solution_text(module) -> str:
    notebook = notebooks.read_source(paths.source(module))
    return "\n".join(
        cell.source for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("solution")
    )


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_catches_its_example_and_lets_the_plain_line_through(rule):
    pattern, _what, bad, plain = RULES[rule]
    wrap = "{}\n".join(["### BEGIN SOLUTION\n", "### END SOLUTION"])
    assert offences(wrap.format(bad)) == [f"{rule}: {bad}"]
    assert offences(wrap.format(plain)) == []
    assert offences(f"{bad}\n{wrap.format(plain)}") == []  # outside a region: given code


def test_the_old_module_12_is_refused():
    """Module 12 as it was before the lessons were made plain (in-place softmax, packed heads)."""
    old = """
    ### BEGIN SOLUTION
    peak = scores.max(axis=-1, keepdims=True)
    np.subtract(scores, peak, out=scores)
    np.exp(scores, out=scores)
    total = scores.sum(axis=-1, keepdims=True)
    np.reciprocal(total, out=total)
    ### END SOLUTION
    ### BEGIN SOLUTION
    y = np.array([rows @ w for w in weights])  # (n, B*T, E)
    out = np.ascontiguousarray(heads.transpose(0, 1, 3, 2, 4))  # (n, B, H, T, D)
    ### END SOLUTION
    ### BEGIN SOLUTION
    out = Attention.apply(qkv, mask=mask, weights_out=kept)
    ### END SOLUTION
    """
    rules = {entry.split(":")[0] for entry in offences(old)}
    assert rules == {"out= buffer", "reciprocal trick", "contiguous copy", "side-channel output"}


@pytest.mark.parametrize("module", LESSONS, ids=lambda m: m.name)
def test_every_lesson_region_is_plain(module):
    text = _solution_text(module)
    assert regions(text), f"{module.name} has no solution region"
    found = offences(text)
    assert not found, (
        f"{module.name}: a solution region holds speed work that belongs in module 18 "
        f"(tinytorch/accel): {found}"
    )
