"""A PostgreSQL server for the shared-gradebook tests, found or started by the tests themselves.

In order: the server named by TITO_TEST_POSTGRES (and nothing else when it is set); the one
`.ci/start-postgres` makes (127.0.0.1:5432, role `tito`); else a throwaway cluster that this
module initialises in a temporary folder and serves on 127.0.0.1 at a free port until the test
session ends. As root the throwaway server runs as the `postgres` user (PostgreSQL refuses to
run as root). When none of that can work, `Unavailable` says why in one line.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT = "postgresql+psycopg://tito:tito@127.0.0.1:5432/postgres"
INSTALL = "install PostgreSQL (as root on Debian: `make test` does) or set TITO_TEST_POSTGRES"


class Unavailable(Exception):
    """No server for the tests, and why (one line)."""


def reachable(url: str) -> str | None:
    """None when `url` accepts a connection, else the driver's first line of error."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            return None
    except sa.exc.OperationalError as err:
        return str(err.orig).strip().splitlines()[0]
    finally:
        engine.dispose()


def binaries() -> Path | None:
    """The folder holding initdb and pg_ctl: on PATH, else Debian's newest /usr/lib/postgresql."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3])
    )
    return versions[-1].parent if versions else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def throwaway() -> Iterator[str]:
    """A new cluster in a temporary folder on 127.0.0.1, stopped and deleted afterwards."""
    bindir = binaries()
    if bindir is None:
        raise Unavailable(f"no server at {DEFAULT} and no initdb to start one: {INSTALL}")
    user = {}
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise Unavailable(
                "running as root and there is no `postgres` user to run a throwaway server as: "
                + INSTALL
            ) from None
        user = {"user": owner.pw_uid, "group": owner.pw_gid}
    folder = Path(tempfile.mkdtemp(prefix="tito-postgres-"))
    if user:
        os.chown(folder, user["user"], user["group"])
    data, port = folder / "data", free_port()

    def run(*command: str) -> None:
        done = subprocess.run(
            [str(bindir / command[0]), *command[1:]], capture_output=True, text=True, **user
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
            raise Unavailable(f"{command[0]} failed for a throwaway PostgreSQL: {lines[-1]}")

    try:
        # role `tito`, a superuser; trust on a loopback-only server in a private folder
        run("initdb", "-D", str(data), "-U", "tito", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off"
        run("pg_ctl", "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
        try:
            yield f"postgresql+psycopg://tito:tito@127.0.0.1:{port}/postgres"
        finally:
            run("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def server() -> Iterator[str]:
    """The URL of a server the tests may create databases on (see the module docstring)."""
    chosen = os.environ.get("TITO_TEST_POSTGRES")
    if chosen:
        error = reachable(chosen)
        if error:
            raise Unavailable(f"TITO_TEST_POSTGRES={chosen} does not answer: {error}")
        yield chosen
        return
    if reachable(DEFAULT) is None:
        yield DEFAULT
        return
    with throwaway() as url:
        yield url
