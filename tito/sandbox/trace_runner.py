"""Record every operation a module's checks make, for `tito diagnose`. tito.student.diagnose starts
this
file as a script (`python -I trace_runner.py`), once over the student's code and once over the
reference; it is never imported by tito itself.

stdin: one JSON job (see tito.student.diagnose.trace). It writes into the folder job["out"], or, in
the
grading sandbox where nothing is writable, to stdout as one line "<nonce> trace <base64>":

trace.npz (tito/sandbox/npzwire.py: no pickle): the numbers, keyed "c<check>e<event>_<name>", and a
JSON record: per check, the events in the order they happened: each forward of an operation
  (its class, the layer it ran in, the notebook cell and line of the code that called it), each
  backward (the gradient it got and the ones it gave), through the engine or called by the check
  itself (class Direct), each layer's output, and the values the
  check's probe returned; plus the error the check ended with, if any (its first assert that
  did not hold: a check's asserts, and numpy.testing's, are recorded and the check runs on).

numpy's global generator and `random` are seeded with the job's seed before the cells, each
check and each probe, so that both runs draw the same numbers (a layer's default weights).

Cells are compiled with the file name "<cell LABEL>", so a frame tells which cell it is in.
"""

import ast
import json
import os
import random
import runpy
import sys
import traceback
import types
from pathlib import Path

# tito/sandbox/cells.py, from the copy next to this file (the runner never imports tito)
CELLS = types.SimpleNamespace(
    **runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cells.py"))
)

np = None  # numpy, imported once the job has said where it is (the sandbox runs python -S)

MAX_EVENTS = 4000  # per check; later events are counted, not kept
DROPPED = "-"  # an array's key when the budget was spent before it (tito.student.diagnose)


def _array(value):
    if not isinstance(value, np.ndarray):
        value = getattr(value, "data", value)  # a Tensor gives its array
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return np.asarray(value)
    return None


def _cell_of(code) -> str | None:
    name = code.co_filename
    return name[len("<cell ") : -1] if name.startswith("<cell ") else None


def _defined(method) -> list | None:
    """[cell label, line] where a method was written, when it was written in a cell."""
    method = getattr(method, "__func__", method)
    code = getattr(getattr(method, "__wrapped__", method), "__code__", None)
    if code is None or _cell_of(code) is None:
        return None
    return [_cell_of(code), code.co_firstlineno]


def _callers() -> list:
    """[[cell label, line], ...] of the frames running notebook-cell code, innermost first."""
    found, frame = [], sys._getframe(2)
    while frame is not None and len(found) < 8:
        label = _cell_of(frame.f_code)
        if label is not None:
            found.append([label, frame.f_lineno])
        frame = frame.f_back
    return found


class Recorder:
    def __init__(self, arrays: dict, budget: list):
        self.arrays, self.budget = arrays, budget
        self.events: list[dict] = []
        self.dropped = 0
        self.layers: list[str] = []
        self.forward_of: dict[int, int] = {}  # id(operation) -> its forward event

    def _keep(self, index: int, name: str, value) -> str | None:
        """The array's key; None when the value is not numeric, DROPPED when it is but the
        trace's budget (bytes, arrays) is spent, so that tito compares nothing there."""
        array = _array(value)
        if array is None:
            return None
        if array.nbytes > self.budget[0] or self.budget[1] < 1:
            return DROPPED
        self.budget[0] -= array.nbytes
        self.budget[1] -= 1
        key = f"c{self.check}e{index}_{name}"
        self.arrays[key] = np.array(array, copy=True)
        return key

    def _event(self, event: dict, values: dict) -> int | None:
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return None
        index = len(self.events)
        event["arrays"] = {name: self._keep(index, name, v) for name, v in values.items()}
        self.events.append(event)
        return index

    # the engine's listener interface (tinytorch/core/hooks.py)
    def forward(self, fn, inputs, kwargs, output, seconds):
        kind = type(fn)
        event = {
            "kind": "forward",
            "op": kind.__name__,
            "layer": self.layers[-1] if self.layers else None,
            "called": _callers(),
            "defined": _defined(getattr(kind, "forward", None)),
            "shapes": [
                list(np.shape(_array(x))) if _array(x) is not None else None for x in inputs
            ],
        }
        values = {"out": output, **{f"in{i}": x for i, x in enumerate(inputs)}}
        index = self._event(event, values)
        if index is not None:
            self.forward_of[id(fn)] = index

    def backward(self, fn, grad, grads, seconds):
        kind = type(fn)
        grads = grads if isinstance(grads, tuple) else (grads,)
        event = {
            "kind": "backward",
            "op": kind.__name__,
            "forward": self.forward_of.get(id(fn)),
            "called": _callers(),
            "defined": _defined(getattr(kind, "backward", None)),
            "count": len(grads),
        }
        values = {"grad": grad, **{f"g{i}": g for i, g in enumerate(grads)}}
        self._event(event, values)

    def enter(self, module):
        self.layers.append(type(module).__name__)

    def exit(self, module, output, seconds):
        name = self.layers.pop() if self.layers else type(module).__name__
        event = {"kind": "layer", "op": name, "called": _callers()}
        event["defined"] = _defined(getattr(type(module), "forward", None))
        self._event(event, {"out": output})


class Direct:
    """Records the forward and backward calls a check makes itself, without `Function.apply`
    or the engine (modules 01 and 02 test a backward by calling it): the engine's listeners
    never hear those. Each `forward`/`backward` written in a cell of a Function class is wrapped
    once; a call from the engine's own code (tinytorch/core/hooks.py), which the listeners
    already hear, or from inside another recorded call of the same operation is not recorded
    again."""

    def __init__(self, hooks_file: str):
        self.recorder = None  # the check's Recorder while a check runs, else None
        self.hooks = os.path.realpath(hooks_file)
        self.inside: set[int] = set()  # ids of operations in a recorded call now

    def watch(self, namespace: dict, bases: tuple) -> None:
        for value in list(namespace.values()):
            if not (isinstance(value, type) and bases and issubclass(value, bases)):
                continue
            for name in ("forward", "backward"):
                method = value.__dict__.get(name)
                if isinstance(method, types.FunctionType) and _defined(method):
                    setattr(value, name, self._wrap(name, method))

    def _engine(self, frame) -> bool:
        return frame is not None and os.path.realpath(frame.f_code.co_filename) == self.hooks

    def _wrap(self, name: str, method):
        direct = self

        def call(fn, *args, **kwargs):
            recorder = direct.recorder
            if recorder is None or id(fn) in direct.inside or direct._engine(sys._getframe(1)):
                return method(fn, *args, **kwargs)
            direct.inside.add(id(fn))
            try:
                result = method(fn, *args, **kwargs)
            finally:
                direct.inside.discard(id(fn))
            if name == "forward":
                recorder.forward(fn, list(args), kwargs, result, 0.0)
            else:
                grad = args[0] if args else kwargs.get("grad")
                recorder.backward(fn, grad, result, 0.0)
            return result

        call.__wrapped__ = method
        call.__name__, call.__qualname__ = method.__name__, method.__qualname__
        call.__doc__ = method.__doc__
        return call


def _bases(namespace: dict) -> tuple:
    """The Function classes: the one a cell defined (module 01) and the package's."""
    found = [namespace.get("Function")]
    tensor = sys.modules.get("tinytorch.core.tensor")
    found.append(getattr(tensor, "Function", None))
    return tuple({id(b): b for b in found if isinstance(b, type)}.values())


def _setup_error(label: str, err: BaseException) -> dict:
    """A failed cell: its error, and where (a syntax error's own line: it ran no frame)."""
    if isinstance(err, SyntaxError) and err.filename == f"<cell {label}>":
        return {"cell": label, "error": f"{type(err).__name__}: {err.msg}"[:320],
                "where": [[label, int(err.lineno or 0)]]}  # fmt: skip
    return {"cell": label, "error": CELLS.describe(err), "where": _where(err)}


def _where(err: BaseException) -> list:
    """[[cell label, line], ...] of the notebook-cell frames the error passed, innermost first."""
    found = []
    for frame, line in traceback.walk_tb(err.__traceback__):
        label = _cell_of(frame.f_code)
        if label is not None:
            found.insert(0, [label, line])
    return found


def _raised_in(err: BaseException) -> list | None:
    """[cell label, function] of the innermost notebook-cell frame the error passed, when that
    frame is a function's ("MatMul.backward")."""
    found = None
    for frame, _ in traceback.walk_tb(err.__traceback__):
        label = _cell_of(frame.f_code)
        if label is not None:
            found = [label, getattr(frame.f_code, "co_qualname", frame.f_code.co_name)[:200]]
    return None if found is None or found[1].startswith("<") else found


def _failure(err: BaseException) -> dict:
    """A check's assert that did not hold, where it was (innermost notebook-cell frame first)."""
    return {"error": CELLS.describe(err), "where": _callers()}


def _soften_asserts() -> list:
    """numpy.testing's assert functions record their first failure instead of raising."""
    import numpy.testing as npt

    failed: list = []

    def soft(check):
        def call(*args, **kwargs):
            try:
                return check(*args, **kwargs)
            except AssertionError as err:
                failed.append(_failure(err))

        return call

    for name in dir(npt):
        if name.startswith("assert_") and callable(getattr(npt, name)):
            setattr(npt, name, soft(getattr(npt, name)))
    return failed


SOFT_ASSERT = "__tito_assert_failed__"  # the name a check's rewritten `assert` calls


class _SoftAsserts(ast.NodeTransformer):
    """`assert test, message` becomes `if not test: SOFT_ASSERT(message)`: the condition is
    evaluated as in the notebook (an error in it stops the check), and a false one is recorded
    and the check runs on, so that it still returns its numbers for the comparison."""

    def visit_Assert(self, node):
        self.generic_visit(node)
        message = node.msg if node.msg is not None else ast.Constant(None)
        call = ast.Call(ast.Name(SOFT_ASSERT, ast.Load()), [message], [])
        test = ast.UnaryOp(ast.Not(), node.test)
        return ast.copy_location(ast.If(test, [ast.Expr(call)], []), node)


def _soft_check(code: str):
    """The check's syntax tree with its asserts recorded instead of raised (its own source when
    it does not parse: compiling it then reports the error as the notebook would)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    return ast.fix_missing_locations(_SoftAsserts().visit(tree))


def _first_failure(record: dict, failed: list, checks: set) -> None:
    """The check's error is its first assert that did not hold, unless the check stopped first
    with an error raised in a cell other than a check's (the student's code, named by it)."""
    if not failed:
        return
    if record["error"] is not None and record["where"] and record["where"][0][0] not in checks:
        return
    record["error"], record["where"] = failed[0]["error"], failed[0]["where"]
    record.pop("raised_in", None)


def _seed(seed: int) -> None:
    """The same start for every random draw the code can make without a generator of its own:
    a layer's default weights come from numpy's global generator, and both runs (the student's
    and the reference's) must build the same ones."""
    random.seed(seed)
    np.random.seed(seed)


def main() -> None:
    global np
    job = json.loads(sys.stdin.read())
    sys.path[:0] = job["path"]
    import numpy as np

    from tinytorch.core import hooks
    from tinytorch.core.hooks import listen

    try:
        from tinytorch.checks import Collect
    except ImportError:  # a package from before graded probes
        Collect = None
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    compile_cell = CELLS.Compiler()
    setup_errors = []
    _seed(job["seed"])
    for label, code in job["cells"]:
        try:
            exec(compile_cell(code, label), namespace)
        except BaseException as err:  # noqa: BLE001 - a broken cell is reported, not fatal
            setup_errors.append(_setup_error(label, err))
    direct = Direct(hooks.__file__)
    direct.watch(namespace, _bases(namespace))
    arrays: dict = {}
    # numbers kept in all: bytes and arrays (tito/sandbox/limits.py)
    budget = [int(job["max_bytes"]), int(job["max_arrays"])]
    checks = []
    failed = _soften_asserts()
    namespace[SOFT_ASSERT] = lambda message=None: failed.append(
        _failure(AssertionError() if message is None else AssertionError(message))
    )
    labels = {label for label, _ in job["checks"]}
    for number, (label, code) in enumerate(job["checks"]):
        recorder = Recorder(arrays, budget)
        recorder.check = number
        record = {"label": label, "error": None, "where": [], "results": {}}
        failed.clear()
        _seed(job["seed"])  # each check starts alike, whatever the ones before it drew
        try:
            if Collect is not None:
                Collect.probes = []
            direct.recorder = recorder
            with listen(recorder):
                # the check's asserts and numpy's are recorded, not raised, so that it runs on
                # and returns its numbers for the comparison
                exec(compile_cell(_soft_check(code), label), namespace)
                probes = list(Collect.probes or []) if Collect is not None else []
                if Collect is not None:
                    Collect.probes = None
                for probe in probes:
                    _seed(job["seed"])
                    result = probe(np.random.default_rng(job["seed"]))
                    for name, value in (result or {}).items():
                        index = recorder._event({"kind": "result", "op": str(name)}, {"out": value})
                        if index is not None:
                            record["results"][str(name)] = index
        except BaseException as err:  # noqa: BLE001 - the error is part of the diagnosis
            record["error"], record["where"] = CELLS.describe(err), _where(err)
            record["raised_in"] = _raised_in(err)
        finally:
            direct.recorder = None
            if Collect is not None:
                Collect.probes = None
        _first_failure(record, failed, labels)
        record["events"], record["dropped"] = recorder.events, recorder.dropped
        checks.append(record)
    wire = CELLS.load_sibling(__file__, "npzwire.py")
    data = wire.pack(arrays, {"setup": setup_errors, "checks": checks})
    if job.get("nonce"):  # in the grading sandbox: nothing is writable, the trace goes to stdout
        sys.stdout.write(wire.line(job["nonce"], "trace", data))
        sys.stdout.flush()
        os._exit(0)
    Path(job["out"], "trace.npz").write_bytes(data)


if __name__ == "__main__":
    main()
