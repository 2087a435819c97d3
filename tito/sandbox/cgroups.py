"""A cgroup for each sandbox (tito/sandbox/bwrap.py), so that its memory and tasks are capped as a
whole: in a folder delegated to tito ($TITO_CGROUP, or its own cgroup when the memory controller
is delegated to it), in a transient systemd scope, or, as root on a cgroup v1 machine, under its
own memory cgroup. memory_cap() says which applies here.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import time
from pathlib import Path

from tito.sandbox import limits
from tito.sandbox.launch import launch_command
from tito.sandbox.limits import TASKS


def _limit() -> int:
    return limits.SANDBOX_MEMORY


def _writable() -> int:
    return limits.TMP_BYTES + limits.SHM_BYTES


def _own_cgroup(version: int) -> Path | None:
    """This process's cgroup folder in the v2 hierarchy (version 2) or the v1 memory one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    where = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (version == 2 and controllers == "") or (
            version == 1 and "memory" in controllers.split(",")
        ):
            where = path
    if where is None:
        return None
    for mount in mounts:
        left, _, right = mount.partition(" - ")
        fstype, _, options = right.split(" ", 2)
        if (version == 2 and fstype == "cgroup2") or (
            version == 1 and fstype == "cgroup" and "memory" in options.split(",")
        ):
            root, point = left.split(" ")[3:5]
            if where.startswith(root):
                return Path(point) / os.path.relpath(where, root)
    return None


def _delegated(folder: Path) -> int | None:
    """2 or 1 when tito may make a child cgroup with a memory limit in `folder`, else None."""
    if (folder / "cgroup.controllers").exists():
        try:
            enabled = (folder / "cgroup.subtree_control").read_text().split()
        except OSError:
            return None
        return 2 if "memory" in enabled and os.access(folder, os.W_OK) else None
    if (folder / "memory.limit_in_bytes").exists() and os.access(folder, os.W_OK):
        return 1
    return None


_count = itertools.count()


def _make_cgroup(parent: Path, version: int) -> Path | None:
    """A fresh child cgroup of `parent`, limited to _limit() (no swap) and TASKS."""
    child = parent / f"tito-{os.getpid()}-{next(_count)}"
    if version == 2:
        limits = {"memory.max": _limit(), "memory.swap.max": 0, "pids.max": TASKS}
    else:
        limits = {
            "memory.limit_in_bytes": _limit(),
            "memory.memsw.limit_in_bytes": _limit(),
        }
    try:
        child.mkdir()
        for name, value in limits.items():
            if (child / name).exists():
                (child / name).write_text(str(value))
        main = "memory.max" if version == 2 else "memory.limit_in_bytes"
        if int((child / main).read_text().split()[0]) > _limit():
            raise OSError("the memory limit did not hold")
    except OSError:
        remove(child)
        return None
    return child


def remove(child: Path) -> None:
    if (child / "cgroup.kill").exists():
        try:
            (child / "cgroup.kill").write_text("1")
        except OSError:
            pass
    deadline = time.monotonic() + 2
    while child.exists():
        try:
            child.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)


@functools.cache
def _systemd_run() -> list[str]:
    """systemd-run's prefix that runs a command in a transient scope with the sandbox's memory
    and task limits, when the user's (or, as root, the system's) manager answers; else []."""
    binary = shutil.which("systemd-run")
    if binary is None:
        return []
    prefix = [
        binary,
        *([] if (os.geteuid() == 0) else ["--user"]),
        "--scope",
        "--quiet",
        "--collect",
    ]
    prefix += ["-p", f"MemoryMax={_limit()}", "-p", "MemorySwapMax=0"]
    prefix += ["-p", f"TasksMax={TASKS}", "--"]
    try:
        done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return prefix if done.returncode == 0 else []


@functools.cache
def _cgroup_parent() -> tuple[Path, int] | None:
    """Where sandbox cgroups are made: $TITO_CGROUP (a cgroup folder delegated to tito), else
    this process's own cgroup when memory can be limited below it, v2 first, then v1."""
    named = os.environ.get("TITO_CGROUP")
    candidates = [Path(named)] if named else [_own_cgroup(2), _own_cgroup(1)]
    for folder in candidates:
        version = _delegated(folder) if folder else None
        if version and _cgroup_works(folder, version):
            return folder, version
    return None


def _cgroup_works(parent: Path, version: int) -> bool:
    child = _make_cgroup(parent, version)
    if child is None:
        return False
    try:
        done = subprocess.run(_launch_true(child), capture_output=True, timeout=10)
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        remove(child)


def memory_cap() -> str:
    """How the memory of a whole sandbox is capped here, in words."""
    mib = _limit() // 2**20
    found = _cgroup_parent()
    if found and (found[1] == 2 or not _systemd_run()):
        return f"cgroup v{found[1]} under {found[0]} ({mib} MiB, no swap)"
    if _systemd_run():
        return f"systemd scope ({mib} MiB, no swap, {TASKS} tasks)"
    return (
        "no cgroup here: each process's address space is limited, and the sandbox's only "
        f"writable file systems hold {_writable() // 2**20} MiB"
    )


def memory_prefix() -> tuple[list[str], Path | None]:
    """(command prefix, cgroup folder to join) for one sandbox."""
    found = _cgroup_parent()
    if found and found[1] == 2:
        return [], _make_cgroup(*found)
    if _systemd_run():
        return _systemd_run(), None
    if found:
        return [], _make_cgroup(*found)
    return [], None


def _launch_true(child: Path) -> list[str]:
    return launch_command(["/bin/true"], child)
