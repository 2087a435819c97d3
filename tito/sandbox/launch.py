"""How tito starts a sandbox: a small launcher, run by tito's own Python, joins the sandbox's
cgroup, caps its memory and, when tito is root, lets go of root before it becomes bubblewrap."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tito.sandbox import limits

NOBODY = 65534  # the uid and gid the sandbox runs as, inside and (when tito is root) outside


def drops_root() -> bool:
    """True when tito runs as root: the sandbox then runs as NOBODY on the host as well."""
    return os.geteuid() == 0


def inside(path: str, folder: str) -> bool:
    return path != folder and path.startswith(folder.rstrip(os.sep) + os.sep)


# Run by tito's own Python (`-I -S -c`) between tito and bubblewrap: it joins the sandbox's
# cgroup and, when tito is root, lets go of root before it becomes bubblewrap. A Python kept
# under root's home (pyenv in /root, mode 0700) is out of NOBODY's reach: in a mount namespace
# of its own, the launcher first covers each such private folder with an empty tmpfs anyone may
# search and binds back into it just the folders the sandbox needs ("covers").
LAUNCHER = r"""
import ctypes, json, os, resource, sys
spec = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (spec["memory"], spec["memory"]))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
if spec["cgroup"]:
    with open(spec["cgroup"], "w") as procs:
        procs.write("0")
if spec["covers"]:
    libc = ctypes.CDLL(None, use_errno=True)
    def check(result, what):
        if result != 0:
            sys.exit(f"tito sandbox launcher: {what}: {os.strerror(ctypes.get_errno())}")
    check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, 16384 | 262144, None), "make / private")
    for private, inner in spec["covers"]:
        fds = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in inner]
        check(libc.mount(b"tmpfs", private.encode(), b"tmpfs", 0, b"mode=0755,size=1m"), private)
        for path, fd in zip(inner, fds):
            os.makedirs(path, exist_ok=True)
            source = f"/proc/self/fd/{fd}".encode()
            check(libc.mount(source, path.encode(), None, 4096 | 16384, None), path)
            os.close(fd)
        check(libc.mount(b"none", private.encode(), None, 4096 | 32 | 1, None), private)
if spec["uid"] is not None:
    os.setgroups([])
    os.setresgid(spec["uid"], spec["uid"], spec["uid"])
    os.setresuid(spec["uid"], spec["uid"], spec["uid"])
os.execv(spec["argv"][0], spec["argv"])
"""


def _covers(paths: list[str]) -> list[tuple[str, list[str]]]:
    """(private folder, the paths below it) for every path with a folder above it that not
    everyone may search: such a folder is covered in the launcher's mount namespace."""
    covers: dict[str, list[str]] = {}
    paths = [p for p in paths if not any(inside(p, other) for other in paths)]
    for path in paths:
        for folder in reversed(Path(path).parents):  # from / down
            if not os.stat(folder).st_mode & 0o001:
                covers.setdefault(str(folder), []).append(path)
                break
    return sorted(covers.items())


def launch_command(argv: list[str], cgroup: Path | None, binds: list[str] = ()) -> list[str]:
    """The command that starts `argv` through LAUNCHER; `binds` are the host folders bubblewrap
    will bind, which NOBODY must be able to reach."""
    drop = drops_root()
    spec = {
        "argv": argv,
        "memory": limits.SANDBOX_MEMORY,  # per process; a cgroup, where there is one, caps all
        "cgroup": str(cgroup / "cgroup.procs") if cgroup else None,
        "uid": NOBODY if drop else None,
        "covers": _covers(list(binds)) if drop else [],
    }
    return [str(Path(sys.executable).resolve()), "-I", "-S", "-c", LAUNCHER, json.dumps(spec)]
