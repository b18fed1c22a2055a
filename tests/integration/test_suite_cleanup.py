"""The session-end check (tests/leakcheck.py, hooked in tests/conftest.py): a process the suite
started that still runs when it ends is listed, ended and fails the run, once, in the process
that runs the session (also with xdist workers)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tmux_harness import Tmux

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

LEAKY = """
import subprocess, sys
from pathlib import Path

def test_leaves_a_detached_process(tmp_path_factory):
    # detached (own session), as a server launch is: no process group of the test holds it
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    (Path({pidfile!r})).write_text(str(p.pid))

def test_clean():
    subprocess.run(["true"], check=True)

def test_leaves_its_sshd(tmp_path_factory):
    # as a worker that crashed would: sshd writes its title over its environ, so no tag finds it
    from tests.sshd_harness import start_sshd
    sshd = start_sshd(tmp_path_factory.mktemp("sshd"))
    (Path({pidfile!r} + ".sshd")).write_text(str(sshd.proc.pid))
"""

CLEAN = """
import subprocess

def test_clean():
    subprocess.run(["sleep", "0.1"], check=True)
"""


def run_inner(tmp_path: Path, body: str, *args: str, leak: bool = False) -> subprocess.CompletedProcess:
    (tmp_path / "test_inner.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(REPO)
    if leak:  # it never ends by itself: the full grace (for a server on its way out) would only wait
        env["SPECDEBUG_LEAK_GRACE_S"] = "2"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_inner.py"),
            *args,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_process_left_running_fails_the_run_and_is_ended(tmp_path: Path, workers: str) -> None:
    pidfile = tmp_path / "leaked.pid"
    r = run_inner(tmp_path, LEAKY.format(pidfile=str(pidfile)), "-n", workers, leak=True)
    out = r.stdout + r.stderr
    pid = int(pidfile.read_text())
    assert r.returncode == 1, out
    sshd_pid = int(Path(f"{pidfile}.sshd").read_text())
    assert "3 passed" in out  # the tests passed: the leaks alone fail the run
    # listed once (by the controller, not once per worker), with its PID and command line
    assert len(re.findall(r"process\(es\) the suite started still ran", out)) == 1, out
    assert f"PID {pid} " in out and "sleep 300" in out
    assert f"PID {sshd_pid} " in out and "sshd" in out
    assert not alive(pid), "the leaked process was not ended"
    assert not alive(sshd_pid), "the leaked sshd was not ended"


def test_a_clean_run_passes(tmp_path: Path) -> None:
    r = run_inner(tmp_path, CLEAN, "-n", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "still ran" not in r.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_a_tmux_server_of_a_test_leaves_no_socket_file() -> None:
    """tmux 3.3 keeps its -L socket after kill-server: the harness removes it (a run left ~10 in /tmp)."""
    tmux = Tmux("specdebug-test-socket")
    try:
        tmux.new_session("s", "sleep 30")
        assert os.path.exists(tmux.socket_path())
    finally:
        tmux.kill(check=False)
    assert not os.path.exists(tmux.socket_path())
