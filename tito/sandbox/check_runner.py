"""Run one graded check of one submission. tito.grading.scoring starts this file as a script,
inside the
sandbox, with `python -I -S`; it is never imported by tito itself.

stdin: one JSON job (see tito.grading.scoring.build_job). stdout: whatever the cells print, and
lines that
start with the job's nonce:

    <nonce> note <cell>: <error>    a setup cell raised (the check may still pass)
    <nonce> begin                   the check's own code starts here
    <nonce> numbers <base64>        what the check's probes returned on the job's seed (an .npz,
                                    tito/sandbox/npzwire.py), when the check cell is a probe
                                    (`@graded`)
    <nonce> pass                    the check's code returned
    <nonce> fail <reason>           it raised

Nothing in this output is trusted for a probe: tito compares the numbers with the reference's
on the same seed (tito/grading/judge.py), and a forged line or number can only be wrong. The pass
line
decides only cells that are not probes yet. The nonce is read from stdin before any student code
runs and lives only in this function's locals; the static check in tito.grading.scoring keeps
submitted
code away from frames, sys, os and the other ways to read it.
"""

import json
import os
import re
import resource
import runpy
import select
import signal
import sys
import time
import traceback
import types

# tito/sandbox/cells.py, from the copy next to this file (the runner never imports tito)
CELLS = types.SimpleNamespace(
    **runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cells.py"))
)

# numpy's public modules become read-only, so graded code cannot swap the functions a check
# compares with (np.allclose, np.testing.assert_allclose, ...), even through an alias.
FROZEN = ("numpy", "math")
# bytes of output a check may write, and of arrays its probes may return: both set from the job
# (tito/sandbox/limits.py)
OUTPUT_LIMIT = 0
NUMBERS_BYTES = 0
WIRE = (
    None  # tito/sandbox/npzwire.py, loaded from the copy next to this file once numpy can be found
)


class _ReadOnlyModule(types.ModuleType):
    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and name not in vars(self):
            super().__setattr__(name, value)  # the import system adding a submodule
            return
        raise AttributeError(f"module {self.__name__} is read-only while grading")

    def __delattr__(self, name):
        raise AttributeError(f"module {self.__name__} is read-only while grading")


def _freeze() -> None:
    import numpy
    import numpy.testing  # noqa: F401 - loaded before it is frozen; checks use it

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in FROZEN and type(module) is types.ModuleType:
            try:
                module.__class__ = _ReadOnlyModule
            except TypeError:
                pass


class CellTimeout(BaseException):
    """Raised in the running cell when its time is up (a BaseException, like KeyboardInterrupt)."""

    seconds = 0.0


def _alarm(signum, frame):
    raise CellTimeout()


def _run(code, namespace, seconds: float) -> None:
    """exec with a deadline; the parent kills the whole process if the code outlives it anyway."""
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        exec(code, namespace)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _describe(err: BaseException) -> str:
    if isinstance(err, CellTimeout):
        return f"timeout: stopped after {CellTimeout.seconds:g} s"
    if isinstance(err, MemoryError):
        return "out of memory (MemoryError)"
    return CELLS.describe(err)


class _Watch:
    """While a probe runs: which of the student's functions (`functions`, Class.method names the
    check's cells ask for) returned which arrays, so a failure can name the function whose
    result was wrong. Only names leave this process, and tito keeps only names it knows."""

    def __init__(self, namespace: dict, functions: list[str], check_file: str, lines: list[str]):
        wanted = set(functions)
        self.codes, self.made = {}, {}
        self.check_file, self.lines = check_file, lines
        for value in list(namespace.values()):
            for code in _codes(value):
                name = code.co_qualname
                if name in wanted or name.split(".")[0] in wanted:
                    self.codes[code] = name

    def profile(self, frame, event, arg):
        if event == "return" and frame.f_code in self.codes:
            name = self.codes[frame.f_code]
            try:
                for pointer in _pointers(arg):
                    self.made[pointer] = name
            except Exception:
                pass

    def source_of(self, value) -> str:
        return next((self.made[p] for p in _pointers(value) if p in self.made), "")

    def blame(self, err: BaseException) -> str:
        """The function a failure points at: the student's function it was raised in, else
        the one that made an array the failing line of the probe reads; "" when neither."""
        inside, frame, line = "", None, 0
        tb = err.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            inside = self.codes.get(code, inside)
            if code.co_filename == self.check_file:
                frame, line = tb.tb_frame, tb.tb_lineno
            tb = tb.tb_next
        if inside:
            return inside
        if frame is not None and 0 < line <= len(self.lines):
            for word in re.findall(r"[A-Za-z_]\w*", self.lines[line - 1]):
                found = self.source_of(frame.f_locals.get(word))
                if found:
                    return found
        return ""


def _codes(value) -> list:
    """The code objects of a function or of a class's methods (not entered further)."""
    if isinstance(value, types.FunctionType):
        return [value.__code__]
    if not isinstance(value, type):
        return []
    found = []
    for item in list(vars(value).values()):
        item = getattr(item, "__func__", item)  # staticmethod, classmethod
        if isinstance(item, property):
            item = item.fget
        if isinstance(item, types.FunctionType):
            found.append(item.__code__)
    return found


def _pointers(value) -> list[int]:
    """Where the arrays of a value (an array, a Tensor's .data, a tuple of them) start in
    memory, with the arrays they are views of."""
    import numpy as np

    items = value if isinstance(value, (tuple, list)) else (value,)
    found = []
    for item in items[:16]:
        if not isinstance(item, np.ndarray):
            own = getattr(item, "__dict__", None)
            item = own.get("data") if isinstance(own, dict) else None
        depth = 0
        while isinstance(item, np.ndarray) and depth < 4:
            found.append(item.__array_interface__["data"][0])
            item, depth = item.base, depth + 1
    return found


def _probes(compiled, namespace, seed: int, check: dict | None = None):
    """Run a check cell with `@graded` collecting its probes, then each probe on the grader's
    seed: (arrays keyed p<i>_<name>, one record per probe). A check cell with no probe (a plain
    assert cell) gives no record."""
    import numpy as np

    from tinytorch.checks import Collect, outputs

    Collect.probes = []
    try:
        exec(compiled, namespace)
        probes = list(Collect.probes or [])
    finally:
        Collect.probes = None
    arrays, records, budget = {}, [], NUMBERS_BYTES
    check = check or {}
    lines = str(check.get("code", "")).splitlines()
    watch = _Watch(namespace, check.get("functions") or [], f"<cell {check.get('label')}>", lines)
    for number, probe in enumerate(probes):
        record = {"name": str(getattr(probe, "__name__", "probe"))[:100], "keys": [], "error": ""}
        record["tolerance"] = dict(getattr(probe, "tolerance", {}))
        records.append(record)
        try:
            sys.setprofile(watch.profile if watch.codes else None)
            try:
                returned = probe(np.random.default_rng(seed))
            finally:
                sys.setprofile(None)
            result = outputs(returned)
            made = {name: watch.source_of(array) for name, array in result.items()}
            record["by"] = {name: source for name, source in made.items() if source}
            for name, array in result.items():
                budget -= array.nbytes
                if budget < 0:
                    raise MemoryError(f"a probe may return {NUMBERS_BYTES} bytes in all")
                arrays[f"p{number}_{name}"] = np.array(array, copy=True)
                record["keys"].append(name)
        except BaseException as err:
            if isinstance(err, CellTimeout):
                raise
            record["error"] = _describe(err)
            try:
                record["blame"] = watch.blame(err)
            except Exception:
                pass
            try:
                traceback.print_exception(err, file=sys.stdout, limit=-8)
            except BaseException:
                pass
    return arrays, records


def _check(job: dict, check: dict) -> None:
    """In a forked child: the cells before the check, then the check; never returns."""
    nonce = check["nonce"]
    write, flush = sys.stdout.write, sys.stdout.flush
    signal.signal(signal.SIGALRM, _alarm)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    compile_cell = CELLS.Compiler()
    setup_ends = time.monotonic() + job["timeout"]  # the cells before the check share one timeout
    if check.get("path"):  # an isolated run: its own cells over a stage of its own
        sys.path[: len(job["path"])] = check["path"]
    for label, code, index in check.get("cells") or job["cells"]:
        if index > check["index"]:
            break
        try:
            _run(compile_cell(code, label), namespace, setup_ends - time.monotonic())
        except BaseException as err:
            write(f"\n{nonce} note {label}: {_describe(err)}\n")
    write(f"\n{nonce} begin\n")
    flush()
    numbers = None
    signal.setitimer(signal.ITIMER_REAL, max(job["timeout"], 0.01))
    try:
        compiled = compile_cell(check["code"], check["label"])
        numbers = _probes(compiled, namespace, job["seed"], check)
    except BaseException as err:
        verdict = f"fail {_describe(err)}"
        try:
            traceback.print_exception(err, file=sys.stdout, limit=-8)
        except BaseException:
            pass
    else:
        verdict = "pass"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if numbers is not None and numbers[1]:
        try:
            arrays, records = numbers
            write(WIRE.line(nonce, "numbers", WIRE.pack(arrays, {"probes": records})))
        except BaseException as err:
            verdict = f"fail {_describe(err)}"
    write(f"\n{nonce} {verdict}\n")
    flush()
    os._exit(0)  # no atexit hook or finalizer of graded code runs after the verdict


def _collect(pid: int, pipe: int, seconds: float) -> tuple[bytes, str]:
    """A child's output (at most OUTPUT_LIMIT bytes) and how it ended, in a word or two; it is
    killed when its time is up or it writes more than that."""
    deadline = time.monotonic() + seconds
    chunks, size, ending = [], 0, ""
    while not ending:
        left = deadline - time.monotonic()
        if left <= 0:
            ending = f"timeout {seconds:g}"
        elif select.select([pipe], [], [], min(left, 0.1))[0]:
            data = os.read(pipe, 65536)
            if not data:
                break  # the child closed its output: it ended (or will be killed below)
            size += len(data)
            chunks.append(data)
            if size > OUTPUT_LIMIT:
                ending = "output"
    while not ending:  # the output is closed; wait for the exit
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFSIGNALED(status):
                ending = f"signal {os.WTERMSIG(status)}"
            else:
                ending = f"status {os.WEXITSTATUS(status)}"
            return b"".join(chunks)[:OUTPUT_LIMIT], ending
        if time.monotonic() > deadline:
            ending = f"timeout {seconds:g}"
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return b"".join(chunks)[:OUTPUT_LIMIT], ending


def _load_wire() -> None:
    global WIRE
    WIRE = CELLS.load_sibling(__file__, "npzwire.py")


def main() -> None:
    """Import numpy once, freeze it, then fork one fresh child per check: every check starts
    from the same state, in which no student code has run yet."""
    global OUTPUT_LIMIT, NUMBERS_BYTES
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    OUTPUT_LIMIT, NUMBERS_BYTES = int(job["output_bytes"]), int(job["numbers_bytes"])
    for name, value in job["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    sys.path[:0] = job["path"]
    sys.stderr = sys.stdout  # one stream, in order
    _load_wire()
    _freeze()
    CellTimeout.seconds = job["timeout"]
    checks = job.pop("checks")
    out = sys.stdout.buffer
    for check in checks:
        sys.stdout.flush()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            os.close(write_end)
            for other in checks:  # the child knows its own nonce (and cells) only
                if other is not check:
                    other["nonce"], other["cells"] = "", None
            del checks
            _check(job, check)
        os.close(write_end)
        output, ending = _collect(pid, read_end, 2 * job["timeout"] + 1)
        os.close(read_end)
        out.write(output + f"\n{check['nonce']} ended {ending}\n".encode())
        out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
