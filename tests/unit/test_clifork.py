"""The suite's CLI fork server (tests/clifork.py) gives what `subprocess.run` gives for the same
command: exit code, stdout and stderr apart, the caller's env and cwd, a timeout that ends the
command's whole process group, and a real subprocess for any call it cannot serve the same way."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests import clifork
from tests.leakcheck import TAG_VAR, living_groups
from tests.sshd_harness import free_port

CLI = [sys.executable, "-m", "specdebug.cli"]
pytestmark = pytest.mark.skipif(not clifork.ENABLED, reason="SPECDEBUG_TEST_CLI_FORK=0")


@pytest.fixture(autouse=True)
def _a_server() -> None:
    if clifork._get_server() is None:  # e.g. a kernel without pidfd_open: every run is a real one there
        pytest.skip("the CLI fork server cannot start on this machine")


def both(args: list[str], **kw) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    return clifork.run([*CLI, *args], capture_output=True, text=True, timeout=60, **kw), subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=60, **kw
    )


@pytest.mark.parametrize("args", [["--help"], ["prbe", "x"], ["profile", "check", "nosuch.toml"]])
def test_same_exit_code_and_output_as_a_real_run(args: list[str]) -> None:
    forked, real = both(args)
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)


def test_the_callers_cwd_and_env_reach_the_command(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[server]\nport = 'x'\n")
    env = {**os.environ, "COLUMNS": "61"}
    forked, real = both(["profile", "check", "bad.toml"], cwd=tmp_path, env=env)
    assert forked.returncode == real.returncode == 2
    assert forked.stderr == real.stderr and "bad.toml" in forked.stderr


def test_a_timeout_ends_the_commands_whole_group(tmp_path: Path) -> None:
    """A sim (a server that never ends by itself, with spawned workers) past its timeout: the same
    exception as subprocess.run, and none of its processes left (found by a tag of this test's in
    their environment, which the spawned workers inherit)."""
    tag = f"clifork-{uuid.uuid4().hex}"
    log = tmp_path / "s.log"
    argv = [
        *CLI,
        "sim",
        "--tp",
        "2",
        "--port",
        str(free_port()),
        "--time-scale",
        "0.01",
        "--log-file",
        str(log),
    ]
    # a timeout that lets it start: 4 s idle; a loaded machine had not started the sim by then, so the
    # timeout doubles until it has (the behaviour waited for, with a deadline), each run cleaned up
    for timeout in (4, 8, 16, 32, 64):
        with pytest.raises(subprocess.TimeoutExpired):
            clifork.run(
                argv, capture_output=True, timeout=timeout, env={**os.environ, "CLIFORK_TEST_TAG": tag}
            )
        deadline = time.monotonic() + 60
        while tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert tagged(tag) == []
        if log.exists() and "server_args=" in log.read_text():
            break
    assert "server_args=" in log.read_text()  # it ran, as the sim


def tagged(tag: str) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and f"CLIFORK_TEST_TAG={tag}".encode() in Path(f"/proc/{d}/environ").read_bytes():
                found.append(int(d))
        except OSError:
            pass
    return found


def test_calls_it_cannot_serve_alike_go_to_a_real_subprocess() -> None:
    assert not clifork._servable([*CLI, "--help"], {"input": "x", "capture_output": True})
    assert not clifork._servable([*CLI, "--help"], {})  # output not captured: the caller's terminal
    assert not clifork._servable([sys.executable, "-c", "pass"], {"capture_output": True})
    assert clifork._servable([*CLI, "--help"], {"capture_output": True, "text": True, "timeout": 5})


def test_the_server_is_its_own_group_and_ends_with_close() -> None:
    clifork.run([*CLI, "--help"], capture_output=True, timeout=60)
    server = clifork._server
    assert server is not None and server.alive()
    pgid = os.getpgid(server.proc.pid)
    assert pgid != os.getpgrp()
    tag = f"{TAG_VAR}={os.environ[TAG_VAR]}".encode()  # found by the suite's end check if left
    assert tag in Path(f"/proc/{server.proc.pid}/environ").read_bytes().split(b"\0")
    clifork.close()
    assert not server.alive() and living_groups([pgid]) == []
