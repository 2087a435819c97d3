"""A planted slip costs its function's checks and nothing else (issue 35, item 4).

For each listed module, one realistic slip per solution cell (a sign, an axis, a missing epsilon
or scale, an off-by-one, a wrong transpose, a forgotten term), planted in the reference solution
and graded through the real autograde path (one course, two jobs): the slipped submission loses
points on at least one check that declares the slipped cell (`@graded(grades=...)`) and keeps
full marks on every other check. grades.csv names the lost checks as the reason.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tito.curriculum.catalog import find
from tito.curriculum.program import declared
from tito.grading import course as course_folder
from tito.grading import gradebook
from tito.grading import nbgrader as grading
from tito.grading.nbgrader import Outcome

# a helper beside this file (tests/tito is on no import path, and stays out of the student edition)
_spec = importlib.util.spec_from_file_location(
    "gradient_slips", Path(__file__).with_name("gradient_slips.py")
)
gradient_slips = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = gradient_slips  # its dataclass looks its module up
_spec.loader.exec_module(gradient_slips)

# module -> solution cell -> (text of the reference, the slip that replaces it once)
SLIPS = {
    1: {
        "elementwise": ("return a - b", "return b - a"),  # a sign
        "matmul": ("return a @ b", "return a @ np.swapaxes(b, -1, -2)"),  # a transpose
        "reductions": (  # the mean divided by every element, not the reduced axis's count
            "return np.mean(a, axis=self.axes, keepdims=keepdims)",
            "return np.sum(a, axis=self.axes, keepdims=keepdims) / a.size",
        ),
    },
    2: {
        "pointwise": ("np.where(x >= 0, 1, e) / (1 + e)", "np.where(x >= 0, e, 1) / (1 + e)"),
        "gelu": ("out = 0.5 * x * (1 + self.t)", "out = x * (1 + self.t)"),  # a scale
        "softmax": ("total = e.sum(axis=self.axis,", "total = e.sum(axis=0,"),  # an axis
    },
    3: {
        "module": ("module.training = mode", "self.training = mode"),  # not passed down
        "linear-function": ("gw = self.rows.T @ g", "gw = g.T @ self.rows"),
        "linear": (  # the bias forgotten
            "return LinearFunction.apply(x, self.weight, self.bias)",
            "return LinearFunction.apply(x, self.weight)",
        ),
        "dropout": ("x.dtype.type(1.0 / (1.0 - self.p))", "x.dtype.type(1.0 / self.p)"),
    },
    4: {
        "mse": ("np.sum(self.diff**2) / self.count", "np.sum(self.diff**2)"),  # no mean
        "cross-entropy": (
            "g[np.arange(self.t.size), self.t] -= 1",
            "g[np.arange(self.t.size), self.t] += 1",
        ),
    },
    5: {
        "toposort": ("        seen.add(id(node))\n", ""),  # every path visits again
        "backward": ("node.grad += total", "node.grad = total"),  # no accumulation
        "numerical": ("(upper - lower) / (2 * h)", "(upper - lower) / h"),
    },
    6: {
        "sgd": ("p.data -= self.lr * g", "p.data += self.lr * g"),
        "adam": ("v_hat = v / (1 - self.beta2**t)", "v_hat = v"),  # no bias correction
        "adamw": (
            "p.data *= 1.0 - self.lr * self.weight_decay",
            "p.data *= 1.0 - self.weight_decay",
        ),
    },
    7: {
        "clip": ("scale = max_norm / (total + 1e-6)", "scale = total / max_norm"),
        "schedule": (
            "self.max_lr * (step + 1) / self.warmup_steps",
            "self.max_lr * step / self.warmup_steps",
        ),
        "train-step": ("self.schedule(self.step_count)", "self.schedule(self.step_count + 1)"),
        "seed": ("np.random.seed(int(seed))", "np.random.default_rng(int(seed))"),
        "checkpoint": ("weights[name] = value", "weights[key] = value"),
    },
    8: {
        "tensor-dataset": ("return self.arrays[0].shape[0]", "return self.arrays[0].shape[0] - 1"),
        "dataloader": ("(b + 1) * self.batch_size]", "(b + 1) * self.batch_size - 1]"),
        "lm-dataset": (
            "sliding_window_view(tokens, self.seq_len + 1)",
            "sliding_window_view(tokens, self.seq_len)",
        ),
        "digits": ("(table[:, :64] / 16.0)", "(table[:, :64] * 1.0)"),
    },
    9: {
        "im2col": ("windows.transpose(0, 2, 3, 1, 4, 5)", "windows.transpose(0, 2, 3, 1, 5, 4)"),
        "conv-function": (
            "return out.reshape(n, oh, ow, out_channels).transpose(0, 3, 1, 2)",
            "return out.reshape(n, out_channels, oh, ow)",
        ),
        "conv2d": (
            "return Conv2dFunction.apply(x, self.weight, self.bias, **options)",
            "return Conv2dFunction.apply(x, self.weight, **options)",
        ),
        "pool-functions": ("share = grad / (self.kernel[0] * self.kernel[1])", "share = grad"),
        "batchnorm-function": ("gb = grad.sum(axis=AXES)", "gb = grad.mean(axis=AXES)"),
        "batchnorm": ("self.momentum * var * m / (m - 1)", "self.momentum * var"),
        "flatten": ("-1, *x.shape[end + 1 :])", "-1, *x.shape[end:])"),
    },
    10: {
        "char-tokenizer": (
            "ids = pos.astype(np.int64) + self._offset",
            "ids = pos.astype(np.int64)",
        ),
        "bpe-ops": ("keep[pos + 1] = False", "keep[pos] = False"),
        "bpe-tokenizer": ("ids = merge(ids, pair, 256 + k)", "ids = merge(ids, pair, 255 + k)"),
    },
    11: {
        "lookup": (
            "np.add.at(out, self.ids.reshape(-1), rows)",
            "out[self.ids.reshape(-1)] = rows",
        ),
        "embedding": (  # around the Function: no gradient reaches the table
            "return EmbeddingLookup.apply(self.weight, ids=ids)",
            "return Tensor(self.weight.data[ids])",
        ),
        "positions": ("table[:, 0::2] = np.sin(angles)", "table[:, 0::2] = np.cos(angles)"),
    },
    12: {
        "masks": ("k=past_len + 1)", "k=past_len)"),  # an off-by-one
        "sdpa": (" / q.shape[-1] ** 0.5", ""),  # a missing scale
        "mha": ("merged = out.permute(0, 2, 1, 3).reshape(", "merged = out.reshape("),
    },
    13: {
        "layernorm": ("(variance + self.eps) ** 0.5", "variance**0.5"),  # a missing epsilon
        "mlp": ("self.linear2(self.gelu(self.linear1(x)))", "self.linear2(self.linear1(x))"),
        "block": (  # a forgotten residual
            "x = x + self.attention(self.ln1(x), mask)",
            "x = self.attention(self.ln1(x), mask)",
        ),
        "sample": ("logits.astype(np.float64) / temperature", "logits.astype(np.float64)"),
        "gpt": ("x = self.ln_f(x)", "x = x"),  # the final norm forgotten
    },
    14: {
        "parameters": ("parts[:depth]", "parts[: depth + 1]"),
        "matmul": ("return 2 * batch * a2[-2]", "return batch * a2[-2]"),  # a multiply-add is 2
        "op-flops": (
            "return sum(needed[:2]) * matmul_flops(in_shapes[0], in_shapes[1]), 0",
            "return 2 * matmul_flops(in_shapes[0], in_shapes[1]), 0",
        ),
        "analytic": ("attention_term = 12 * layers", "attention_term = 6 * layers"),
        "profiler": ("kept = output.nbytes if any(fn.needs_grad) else 0", "kept = output.nbytes"),
        "latency": ("times[i] = clock() - start", "times[i] = clock()"),
        "by-operation": ("key=lambda r: r.seconds, reverse=True)", "key=lambda r: r.seconds)"),
    },
    15: {
        "params": ("scale = (hi - lo) / (qmax - qmin)", "scale = (hi - lo) / qmax"),
        "quantize": (
            "q = np.round(x / scale) + zero_point",
            "q = np.round(x / scale) - zero_point",
        ),
        "observer": ("self.high = max(self.high, float(x.max()))", "self.high = float(x.max())"),
        "qlinear": ("axis=1 if per_channel else None", "axis=0 if per_channel else None"),
        "model": (
            "total += module.qweight.nbytes + module.scale.nbytes + module.zero_point.nbytes",
            "total += module.qweight.nbytes",
        ),
    },
    16: {
        "magnitude": ("np.argpartition(np.abs(w).reshape(-1)", "np.argpartition(w.reshape(-1)"),
        "structured": ("np.argsort(importance)[::-1][:keep]", "np.argsort(importance)[:keep]"),
        "lowrank": ("(root[:, None] * vt[:rank])", "(vt[:rank])"),
        "distill-loss": (
            "self.alpha * self.temp * (self.p_s - self.p_t)",
            "self.alpha * (self.p_s - self.p_t)",
        ),
    },
    17: {
        "cache": ("self._v[:, :, self.length : end] = v", "self._v[:, :, self.length : end] = k"),
        "bytes": ("return 2 * num_layers", "return num_layers"),  # K or V forgotten
        "attention": (" / np.sqrt(q.shape[-1])", ""),
        "forward": ("np.arange(past, past + steps)[None]", "np.arange(steps)[None]"),
        "generate": ("past < model.max_seq_len", "past <= model.max_seq_len"),
    },
    18: {
        "softmax": ("    np.reciprocal(total, out=total)\n", ""),  # the sums multiplied in
        "attention": ("g = grad * scale", "g = grad"),  # the scale forgotten
        "projection": ("grad.transpose(1, 3, 0, 2, 4)", "grad.transpose(1, 2, 0, 3, 4)"),  # H, T
        "layernorm": ("gx -= mean_g\n", "gx += mean_g\n"),
        "gelu": ("    out += 0.5\n", "    out -= 0.5\n"),
        "embedding": (
            "np.add.reduceat(rows[order], starts, axis=0)",
            "np.add.reduceat(rows, starts, axis=0)",
        ),
        "adamw": ("        tmp /= math.sqrt(1.0 - self.beta2**t)\n", ""),
    },
    19: {
        "time-calls": ("start = clock()\n        fn()", "fn()\n        start = clock()"),
        "summarize": ("tail = (1 - confidence) / 2 * 100", "tail = (1 - confidence) * 100"),
        "compare": (
            "ratio = float(np.median(b) / np.median(a))",
            "ratio = float(np.median(a) / np.median(b))",
        ),
        "schedule": ("order += names if r % 2 == 0 else names[::-1]", "order += names"),
    },
    20: {
        "bits": ("return float(nats / math.log(2) / chars)", "return float(nats / chars)"),  # nats
        "violation": (
            "bound = baseline.bits_per_char * (1 + event.quality_slack)",
            "bound = baseline.bits_per_char + event.quality_slack",
        ),
        "score": (
            "return float(np.prod(ratios) ** (1 / len(ratios)))",
            "return float(np.mean(ratios))",
        ),
    },
    21: {
        "rmsnorm": (
            "(x * x).mean(axis=-1, keepdims=True) + eps)",
            "(x * x).mean(axis=-1, keepdims=True))",
        ),
        "rotary": (
            "out[..., 0::2] = even * self.cos - odd * self.sin",
            "out[..., 0::2] = even * self.cos + odd * self.sin",
        ),
        "swiglu": (
            "return self.w2(silu(self.w1(x)) * self.w3(x))",
            "return self.w2(silu(self.w1(x)) + self.w3(x))",
        ),
        "attention": (
            "v = self._split(self.v_proj(x), kv_heads)",
            "v = self._split(self.k_proj(x), kv_heads)",
        ),
        "model": ("x = self.norm(x)\n", "\n"),  # the final norm dropped
    },
}

# more slips of the same cells: student "slip-<cell>~<name>"
MORE = {
    1: {  # a backward's sign (issue 35: autograde gave 6/6 while `complete` failed)
        "elementwise~sub-backward": ("return grad, -grad", "return grad, grad"),
        "matmul~backward": ("g @ np.swapaxes(b2, -1, -2)", "g @ b2"),
    },
    12: {
        "masks~future": ("k=past_len + 1)", "k=past_len + 2)"),  # one future key seen
        "sdpa~no-mask": ("scores = scores + Tensor(mask)", "scores = scores"),
        "mha~no-mask": (
            "scaled_dot_product_attention(q, k, v, mask)",
            "scaled_dot_product_attention(q, k, v)",
        ),
        "mha~heads-axis": (  # (B, T, H, D) where (B, H, T, D) belongs
            "self.num_heads, self.head_dim).permute(0, 2, 1, 3)",
            "self.num_heads, self.head_dim)",
        ),
    },
    13: {  # the tied output head without its transpose (issue 35: scored 9/9 before)
        "gpt~tied": ("x @ self.token_embedding.weight.T", "x @ self.token_embedding.weight"),
        "gpt~untied": (  # the head's gradient never reaches the embedding
            "x @ self.token_embedding.weight.T",
            "x @ Tensor(self.token_embedding.weight.data.T)",
        ),
        "gpt~no-mask": ("x = block(x, mask=mask)", "x = block(x)"),
        "block~no-mask": (
            "x = x + self.attention(self.ln1(x), mask)",
            "x = x + self.attention(self.ln1(x))",
        ),
    },
    17: {
        "attention~no-mask": ("scores = scores + _mask(mask)", "scores = scores"),
        "forward~no-mask": (
            "mask = None if steps == 1 else causal_mask(steps, past_len=past)",
            "mask = None",
        ),
    },
    21: {
        "attention~no-mask": (
            "scaled_dot_product_attention(q, k, v, mask)",
            "scaled_dot_product_attention(q, k, v)",
        ),
        "model~no-mask": ("x = block(x, mask, start, cache)", "x = block(x, None, start, cache)"),
        "model~untied": (
            "x @ self.token_embedding.weight.transpose()",
            "x @ Tensor(self.token_embedding.weight.data.T)",
        ),
    },
}

# the structural promises the lessons make, each broken by slips of SLIPS or MORE (module, key)
PROMISES = {
    "weight tying": [(13, "gpt~tied"), (13, "gpt~untied"), (21, "model~untied")],
    "causality": [
        (12, "masks~future"),
        (12, "sdpa~no-mask"),
        (12, "mha~no-mask"),
        (13, "block~no-mask"),
        (13, "gpt~no-mask"),
        (17, "attention~no-mask"),
        (17, "forward~no-mask"),
        (21, "attention~no-mask"),
        (21, "model~no-mask"),
    ],
    "shapes": [
        (8, "lm-dataset"),  # windows of seq_len + 1 tokens
        (9, "flatten"),
        (12, "mha~heads-axis"),
        (14, "parameters"),  # the name's depth
    ],
}


# correct answers written differently from the reference, each as the text allows: they keep full
# marks (student "alt-<cell>~<name>")
ALTERNATIVES = {
    13: {  # the centred values once, and a reciprocal square root
        "layernorm~centred": (
            "normalized = (x - mean) / (variance + self.eps) ** 0.5",
            "centred = x - mean\n        normalized = centred * (variance + self.eps) ** -0.5",
        ),
    },
    19: {  # one generator for both resamplings (issue 35: scored 6/9 before)
        "compare~one-generator": (
            "ratios = bootstrap_medians(b, resamples, seed) / bootstrap_medians(a, resamples, seed "
            "+ 1)",
            "draw = np.random.default_rng(seed)\n"
            "    picks_b = draw.integers(0, len(b), size=(resamples, len(b)))\n"
            "    picks_a = draw.integers(0, len(a), size=(resamples, len(a)))\n"
            "    ratios = np.median(b[picks_b], axis=1) / np.median(a[picks_a], axis=1)",
        ),
    },
}


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def slipped(source, cell_id: str, old: str, new: str):
    nb = nbformat.from_dict(source)
    cell = next(c for c in nb.cells if _meta(c).get("grade_id") == cell_id)
    assert cell.source.count(old) >= 1, f"{cell_id}: the reference no longer holds {old!r}"
    cell.source = cell.source.replace(old, new, 1)
    return nb


@dataclass
class Graded:
    """What one module's autograde found: its checks and each planted submission's outcome."""

    checks: dict[str, tuple[str, ...]]  # check -> the solution cells it declares
    slips: dict[str, Outcome]  # "<cell>" or "<cell>~<name>" (SLIPS, MORE)
    alternatives: dict[str, Outcome]  # "<cell>~<name>" (ALTERNATIVES)
    gradients: list[tuple[list, Outcome]]  # (the gradient slips planted together, outcome)


def modules_needed(items) -> set[int]:
    """The modules the selected tests of this file grade (a run with -k grades only those)."""
    needed = set()
    for item in items:
        if Path(str(item.path)).name != Path(__file__).name:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        needed |= {params["number"]} if "number" in params else set()
        needed |= {number for number, _ in PROMISES.get(params.get("promise"), [])}
        if item.name.startswith("test_grades_csv"):
            needed.add(13)
    return needed


# the modules whose slips take the longest (their demo cells run before every check), graded
# first so that the workers finish together
LONGEST = (18, 14, 1, 9, 21, 13)
WORKERS = 2  # modules graded side by side, each autograde with two jobs


@pytest.fixture(scope="module")
def course(tmp_path_factory, request):
    """One course folder, and every module the selected tests need, graded in it: each module
    by one autograde of all its planted submissions (two jobs), two modules at a time. A module
    whose grading raised holds the exception, which its tests raise."""
    folder = tmp_path_factory.mktemp("course")
    course_folder.init_course(folder, timeout=20)
    needed = modules_needed(request.session.items)
    prepared = {number: plant(folder, number) for number in sorted(needed)}  # writes gradebook
    order = [n for n in LONGEST if n in needed] + [n for n in sorted(needed) if n not in LONGEST]
    with ThreadPoolExecutor(WORKERS) as pool:
        running = {n: pool.submit(grading.autograde, folder, find(n), None, 2) for n in order}
        found = {}
        for number, future in running.items():
            try:
                found[number] = result(prepared[number], future.result())
            except Exception as err:  # noqa: BLE001 - raised again by that module's tests
                found[number] = err
    return folder, found


def plant(folder: Path, number: int):
    """Release module `number` in the course and write every planted submission of it:
    (its checks, the gradient slips' groups)."""
    module = find(number)
    grading.generate(folder, module)
    name = grading.notebook_file(module)
    source = nbformat.read(folder / "source" / module.name / name, as_version=4)
    checks = {
        _meta(c)["grade_id"]: declared(c.source)
        for c in source.cells
        if _meta(c).get("grade") and not _meta(c).get("solution")
    }
    planted = {f"slip-{k}": v for k, v in {**SLIPS[number], **MORE.get(number, {})}.items()}
    planted |= {f"alt-{k}": v for k, v in ALTERNATIVES.get(number, {}).items()}
    notebooks = {}
    for student, (old, new) in planted.items():
        cell = student.split("-", 1)[1].split("~")[0]
        notebooks[student] = slipped(source, cell, old, new)
    groups = gradient_slips.submissions(gradient_slips.module_slips(source), checks)
    for index, group in enumerate(groups):
        notebooks[f"grad-{index}"] = gradient_slips.planted(source, group)
    for student, notebook in notebooks.items():
        target = folder / "submitted" / student / module.name / name
        target.parent.mkdir(parents=True)
        nbformat.write(notebook, target)
    return checks, groups


def result(prepared, found: list[Outcome]) -> Graded:
    checks, groups = prepared
    outcomes = {o.student: o for o in found}
    return Graded(
        checks,
        {s.removeprefix("slip-"): o for s, o in outcomes.items() if s.startswith("slip-")},
        {s.removeprefix("alt-"): o for s, o in outcomes.items() if s.startswith("alt-")},
        [(group, outcomes[f"grad-{i}"]) for i, group in enumerate(groups)],
    )


def graded(course, number: int) -> Graded:
    """What module `number`'s autograde found: every slip of SLIPS, MORE, ALTERNATIVES and
    every gradient slip of the module (tests/tito/gradient_slips.py)."""
    _, found = course
    if isinstance(found[number], BaseException):
        raise found[number]
    return found[number]


@pytest.mark.parametrize("number", sorted(SLIPS))
def test_a_slip_costs_the_checks_that_declare_its_cell_and_nothing_else(course, number):
    found = graded(course, number)
    checks, outcomes = found.checks, found.slips
    solutions = {cell for cells in checks.values() for cell in cells}
    assert set(SLIPS[number]) == solutions  # one slip for every solution cell
    assert set(outcomes) == set(SLIPS[number]) | set(MORE.get(number, {}))
    for student, outcome in outcomes.items():
        cell = student.split("~")[0]
        assert outcome.ok, (student, outcome.message)
        lost = {c.grade_id for c in outcome.checks if not c.passed}
        declaring = {check for check, cells in checks.items() if cell in cells}
        assert lost, f"module {number}: the slip '{student}' cost nothing"
        assert lost <= declaring, f"module {number}: the slip '{student}' cost {lost - declaring}"
        for check in outcome.checks:
            if not check.passed:
                # "cell 'x'", or with no direct evidence "cells 'w', 'x'": the ones it grades
                assert re.search(rf"cells? (?:'[^']+', )*'{re.escape(cell)}'", check.reason), (
                    check.reason
                )


def test_grades_csv_names_every_lost_check_and_its_function(course):
    outcomes = graded(course, 13).slips
    gradebook.export_csv(course[0], course[0] / "grades.csv")
    with open(course[0] / "grades.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    row = next(r for r in rows if r["student_id"] == "slip-layernorm" and "13" in r["assignment"])
    assert float(row["score"]) < float(row["max_score"])
    lost = [c for c in outcomes["layernorm"].checks if not c.passed]
    assert lost
    for check in lost:
        assert f"{check.grade_id}: LayerNorm.forward (cell 'layernorm')" in row["reason"]


@pytest.mark.parametrize("number", sorted(ALTERNATIVES))
def test_a_correct_answer_written_another_way_keeps_full_marks(course, number):
    alternatives = graded(course, number).alternatives
    assert set(alternatives) == set(ALTERNATIVES[number])
    for student, outcome in alternatives.items():
        assert outcome.ok, (student, outcome.message)
        lost = [(c.grade_id, c.reason) for c in outcome.checks if not c.passed]
        assert lost == [], (student, lost)


GRADIENT_MODULES = (1, 2, 3, 4, 9, 11, 16, 18, 21)


def test_the_modules_with_gradients_are_every_module_whose_solutions_return_some(course):
    """GRADIENT_MODULES lists every module with a backward in a solution cell, no other."""
    folder, _ = course
    found = set()
    for number in range(1, 22):
        module = find(number)
        path = folder / "source" / module.name / grading.notebook_file(module)
        if gradient_slips.module_slips(nbformat.read(path, as_version=4)):
            found.add(number)
    assert found == set(GRADIENT_MODULES)


@pytest.mark.parametrize("number", GRADIENT_MODULES)
def test_every_gradient_a_solution_cell_returns_is_graded(course, number, record_property):
    """Each gradient of every backward in a solution cell, sign-flipped alone in its cell, costs
    a check that declares that cell and no other slipped cell of its submission; the
    submission loses nothing outside the checks of its slipped cells."""
    found = graded(course, number)
    assert found.gradients
    unseen = []
    for group, outcome in found.gradients:
        assert outcome.ok, ([s.name for s in group], outcome.message)
        slipped = {slip.cell for slip in group}
        lost = {c.grade_id for c in outcome.checks if not c.passed}
        touched = {check for check, cells in found.checks.items() if slipped & set(cells)}
        assert lost <= touched, f"module {number}: {[s.name for s in group]} cost {lost - touched}"
        for slip in group:
            own = [c for c in lost if slip.cell in found.checks[c]]
            record_property(f"{number:02d} {slip.name}", " ".join(sorted(own)) or "nothing")
            if not own:
                unseen.append(f"{slip.name} (cell '{slip.cell}')")
            assert all(not (slipped - {slip.cell}) & set(found.checks[c]) for c in own)
    assert unseen == [], f"module {number}: these gradient slips cost nothing: {unseen}"


@pytest.mark.parametrize("promise", sorted(PROMISES))
def test_every_structural_promise_is_part_of_some_check(course, promise):
    """Each slip that breaks a promise of the lesson (weight tying, causality, shapes) costs a
    check that declares its cell."""
    for number, key in PROMISES[promise]:
        assert key in {**SLIPS[number], **MORE.get(number, {})}, (number, key)
        found = graded(course, number)
        cell = key.split("~")[0]
        lost = {c.grade_id for c in found.slips[key].checks if not c.passed}
        assert {c for c in lost if cell in found.checks[c]}, (
            f"module {number}: '{key}' cost nothing"
        )
