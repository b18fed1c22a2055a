"""`specdebug demo --check`: the demo's path without a screen, and where its journal goes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import clifork


def specdebug(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def test_demo_check_passes_and_history_finds_its_journal(tmp_path: Path) -> None:
    """A fresh user (own data dir, no --session): the check journals into the user data dir's
    sessions, and `history` without --session finds that journal."""
    env = {k: v for k, v in os.environ.items() if k != "SPECDEBUG_SESSION"}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    r = specdebug("demo", "--check", "--throttle-gpu", "3", "--throttle-after", "0", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    for seen in (
        "ok   8 GPUs: NVIDIA H200",
        "ok   ready after",
        "ok   benchmark: 4 requests",
        "ok   stopped",
    ):
        assert seen in out, out
    assert "warning: GPU 3 throttled before the run: sw_thermal_slowdown" in out
    assert "demo check passed" in out
    sessions = tmp_path / "data" / "specdebug" / "sessions"
    assert [p.name for p in sessions.iterdir()], "the demo journal must be in the user data dir"

    r = specdebug("history", "--json", env=env)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)["results"]
    assert len(results) == 1 and results[0]["status"] == "done"


def test_demo_check_fails_with_the_step(tmp_path: Path) -> None:
    box_tmp = tmp_path / "tmp"
    box_tmp.mkdir()
    env = dict(os.environ, SPECDEBUG_SESSION=str(tmp_path / "session"), TMPDIR=str(box_tmp))
    r = specdebug("demo", "--check", "-c", "no-such-profile", env=env, timeout=60)
    assert r.returncode == 1
    assert "FAIL demo profile 'no-such-profile' not found" in r.stdout
    assert list(box_tmp.iterdir()) == []  # its box folder was made before the profile was looked up
