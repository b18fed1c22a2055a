"""Ctrl+C (SIGINT) or SIGTERM during `launch --wait` says what keeps running (the server, with the
exact `specdebug stop` command) and what was not recorded, instead of ending mute (issue 41).
On this machine as the box (`local:`), with a server that never gets ready."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.security.boxkit import unique, write_profile
from tests.sshd_harness import free_port

DEADLINE_S = 120


def _wait_for_line(proc: subprocess.Popen, needle: str) -> str:
    """Lines of proc's stdout up to the first one holding `needle` (deadline: DEADLINE_S)."""
    seen = ""
    end = time.monotonic() + DEADLINE_S
    assert proc.stdout is not None
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        if needle in line:
            return seen
    raise AssertionError(f"no {needle!r} line: {seen!r}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_launch_wait_interrupted_says_what_keeps_running(tmp_path: Path, sig: signal.Signals) -> None:
    name = unique("interrupted")
    port = free_port()
    prof = write_profile(
        tmp_path / "p.toml",
        name,
        {"argv": ["sleep", "300"], "port": port, "kind": "custom", "log_file": str(tmp_path / "p.log")},
        ready={"health": "/health", "timeout_s": 600},
    )
    base = [sys.executable, "-m", "specdebug.cli"]
    common = ["local:", "-c", str(prof), "--session", str(tmp_path / "s")]
    env = dict(os.environ, SPECDEBUG_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen(
        [*base, "launch", *common, "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_for_line(proc, f"launched {name}: PID")
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        assert proc.returncode == (130 if sig == signal.SIGINT else 143), stderr
        assert f"interrupted: {name} keeps running on local:" in stderr, stderr
        assert f"stop it with: specdebug stop local: -c {prof}" in stderr, stderr
        assert "not recorded: its startup verdict" in stderr and "Traceback" not in stderr, stderr
    finally:
        subprocess.run(
            [*base, "stop", *common, "--grace", "1"], capture_output=True, timeout=DEADLINE_S, env=env
        )
