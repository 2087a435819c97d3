"""Which processes are running, read from /proc: the grading tests assert none outlives them."""

import os
from pathlib import Path


def running(marker: str) -> list[str]:
    """Command lines of the other processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found
