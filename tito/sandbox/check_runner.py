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
import resource
import runpy
import select
import signal
import sys
import time
import traceback
import types

# tito/sandbox/cells.py, stalls.py and probe_watch.py, from the copies next to this file (the
# runner never imports tito)
CELLS, STALLS, WATCH = (
    types.SimpleNamespace(
        **runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), name))
    )
    for name in ("cells.py", "stalls.py", "probe_watch.py")
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
SOLUTIONS = frozenset()  # the labels of the solution cells (the job's "solutions")
REPORT = -1  # in a check's process: the pipe it tells the runner through where its time ran out
# code that ran out of time in an earlier check of this submission: (cell label, cell text,
# qualified name, first line) -> the error (a CellTimeout) a later check raises at once there
STALLED: dict = {}


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
    """Raised in the running cell when its time is up (a BaseException, like KeyboardInterrupt);
    its argument is where the time ran out. A subclass with a `reason` stands in, in a later
    check, for code that already ran out of time (STALLED)."""

    seconds = 0.0
    reason = ""


def _alarm(signum, frame):
    """Time is up: tell the runner where (before anything else, for code that then ignores the
    stop and is killed), and stop the code there."""
    place = STALLS.where(frame, SOLUTIONS)
    if place is not None and REPORT >= 0:
        try:
            os.write(REPORT, (json.dumps(place) + "\n").encode()[:4096])
        except OSError:
            pass
    raise CellTimeout(STALLS.describe(*place[:2]) if place else "")


def _run(code, namespace, seconds: float) -> None:
    """exec with a deadline; the parent kills the whole process if the code outlives it anyway."""
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        exec(code, namespace)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _describe(err: BaseException) -> str:
    if isinstance(err, CellTimeout):
        if err.reason:
            return err.reason
        place = err.args[0] if err.args and isinstance(err.args[0], str) else ""
        return f"timeout: stopped after {CellTimeout.seconds:g} s" + (
            f" in {place}" if place else ""
        )
    if isinstance(err, MemoryError):
        return "out of memory (MemoryError)"
    return CELLS.describe(err)


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
    watch = WATCH.Watch(
        namespace, check.get("functions") or [], f"<cell {check.get('label')}>", lines
    )
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
            _run(_compiled(compile_cell, code, label), namespace, setup_ends - time.monotonic())
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


def _compiled(compile_cell, code: str, label: str):
    """A cell before the check, compiled, with the code that ran out of time in an earlier
    check swapped for code that raises that timeout at once (the whole cell, when it was the
    cell's own top level that ran out)."""
    compiled = compile_cell(code, label)
    error = STALLED.get((label, code, compiled.co_qualname, compiled.co_firstlineno))
    if error is not None:
        raise error
    return STALLS.replace(compiled, STALLED, label, code) if STALLED else compiled


def _reported(pipe: int) -> list:
    """The places a finished check's process said its time ran out (at most 64 KiB of them)."""
    os.set_blocking(pipe, False)
    data = b""
    try:
        while len(data) < 65536:
            chunk = os.read(pipe, 65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    places = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            label, name, first = json.loads(line)
        except (ValueError, TypeError):
            continue
        if isinstance(label, str) and isinstance(name, str) and isinstance(first, int):
            places.append((label, name, first))
    return places


def _remember(places: list, job: dict, check: dict) -> str:
    """Keep each place where a check's time ran out in a cell before it (STALLED), so later
    checks fail at once there; returns the first place, as a student reads it ("" if none)."""
    cells = {label: code for label, code, index in check.get("cells") or job["cells"]
             if index <= check["index"]}  # fmt: skip
    said = ""
    for label, name, first in places:
        said = said or STALLS.describe(label, name)
        if label not in cells or (label, cells[label], name, first) in STALLED:
            continue
        reason = (f"timeout: stopped after {job['timeout']:g} s in {STALLS.describe(label, name)}"
                  f", first in {check['label']}; not run again")  # fmt: skip
        STALLED[(label, cells[label], name, first)] = type(
            "CellTimeout", (CellTimeout,), {"reason": reason}
        )
    return said


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
    from the same state, in which no student code has run yet (but code that ran out of time in
    an earlier check is known, STALLED)."""
    global OUTPUT_LIMIT, NUMBERS_BYTES, SOLUTIONS, REPORT
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    OUTPUT_LIMIT, NUMBERS_BYTES = int(job["output_bytes"]), int(job["numbers_bytes"])
    SOLUTIONS = frozenset(job.get("solutions") or ())
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
        report_read, REPORT = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            os.close(report_read)
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            os.close(write_end)
            for other in checks:  # the child knows its own nonce (and cells) only
                if other is not check:
                    other["nonce"], other["cells"] = "", None
            del checks
            _check(job, check)
        os.close(write_end)
        os.close(REPORT)
        REPORT = -1
        output, ending = _collect(pid, read_end, 2 * job["timeout"] + 1)
        os.close(read_end)
        place = _remember(_reported(report_read), job, check)
        os.close(report_read)
        if place and ending.startswith("timeout"):
            ending += f" in {place}"
        out.write(output + f"\n{check['nonce']} ended {ending}\n".encode())
        out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
