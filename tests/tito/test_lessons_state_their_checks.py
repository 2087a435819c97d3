"""Issue 37: what a module's tests and graded checks require of the code a student writes is
stated in the lesson's text. Per module, each row names what a check enforces (found in the
module's tests or graded cells) and the words of the lesson that state it (found in its
markdown), so a check that starts to require something new fails here until the text says it."""

import pytest

from tito.curriculum import notebooks
from tito.curriculum.catalog import find
from tito.curriculum.paths import PACKAGE_ROOT

# (module, what a check enforces, the lesson's words that state it)
STATED = [
    (3, 'self.register_buffer("seen"',
     "`state_dict()` saves it and `load_state_dict()` restores it"),
    (7, "assert seen == [schedule(s) for s in range(6)]",
     "set `self.optimizer.lr = self.schedule(self.step_count)`"),
    (7, "assert seen == [schedule(s) for s in range(6)]",
     "then add one to `self.step_count`"),
    (9, "more than one value per channel",
     'says the layer needs "more than one value per channel"'),
    (9, "np.shares_memory(a, w)", "nothing there holds the weight when only the weight needs"),
    (9, "a.size >= cols", "nothing the size of `cols` when only the input does"),
    (9, "layers.1.running_mean", "`state_dict()` saves them and `load_state_dict()` restores them"),
    (12, "the lesson asks for float32 masks", "Both masks are **float32** arrays"),
    (7, "loss is nan; the weights were not updated",
     '`f"the loss is {value}; the weights were not updated"`'),
    (7, "[0.6, 0.0, 0.8]", "scale every gradient by the same factor so the length is `max_norm`"),
    (7, "[0.25, 1.0, 1.0, 0.6, 0.2, 0.2]", "`max_lr * (s + 1) / W` while `s < W`"),
    (17, "assert pruned.shape == (2, 7, 16)", "Merge to `H * D` columns"),
    (17, "causal_mask(3)", "`causal_mask(T_new, past_len=past)`"),
    (19, "slack = 0.07 * (high - low)", "within 7% of the interval's width"),
    (19, "summarize(samples, seed=", "calls `bootstrap_medians(samples, resamples, seed)`"),
    (20, "over the budget of 60", 'CPU-s, over the budget of {budget:g}"`'),
    (20, "is above the bound 2.040 (baseline 2.000 + 2%)",
     'is above the bound {bound:.3f} (baseline {base:.3f} + {slack:.0%})"`'),
    (20, "just_in = Measured(900.0, 10, 2.0 * 1.02)", "A bound is kept at equality"),
]  # fmt: skip


def checks_text(number: int) -> str:
    """The module's tests and its graded cells, where requirements are enforced."""
    module = find(number)
    tests = "\n".join(p.read_text() for p in sorted((PACKAGE_ROOT / module.tests).glob("*.py")))
    nb = notebooks.read_source(PACKAGE_ROOT / module.source)
    graded = "\n".join(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    return tests + "\n" + graded


def lesson_text(number: int) -> str:
    nb = notebooks.read_source(PACKAGE_ROOT / find(number).source)
    return " ".join(" ".join(c.source for c in nb.cells if c.cell_type == "markdown").split())


@pytest.mark.parametrize(("number", "enforced", "stated"), STATED, ids=lambda v: str(v)[:40])
def test_what_a_check_enforces_the_lesson_states(number, enforced, stated):
    assert enforced in checks_text(number), f"module {number}: no check enforces {enforced!r}"
    assert " ".join(stated.split()) in lesson_text(number), f"module {number} never says {stated!r}"
