"""`profile check` refuses what `launch` refuses (issue 40).

A 5000-character profile name passed `profile check` and failed only at launch (the box's state
file NAME.json cannot be named so; the record's name is at most 200 characters).  A profile whose
server record would be over the 1 MiB stop and status read back is refused by both as well.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.security.boxkit import run, write_profile


def check(*files: Path, as_json: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "specdebug.cli", "profile", "check", *map(str, files)]
    return subprocess.run(
        [*cmd, *(["--json"] if as_json else [])], capture_output=True, text=True, timeout=60
    )


def test_a_name_launch_cannot_record_is_refused_by_check(tmp_path: Path) -> None:
    server = {"argv": ["sleep", "1"], "port": 1, "log_file": str(tmp_path / "l")}
    long_name = write_profile(tmp_path / "long.toml", "n" * 5000, server)
    at_bound = write_profile(tmp_path / "ok.toml", "n" * 200, server)
    res = check(long_name)
    assert res.returncode == 2, res.stdout
    assert "5000 characters, over 200" in res.stderr, res.stderr
    assert check(at_bound).returncode == 0
    many = check(long_name, at_bound, as_json=True)
    rows = [json.loads(line) for line in many.stdout.splitlines() if line.startswith("{")]
    assert [r["ok"] for r in rows] == [False, True], many.stdout


def test_a_record_too_large_is_refused_by_check_as_by_launch(sshd, tmp_path: Path) -> None:
    env = {f"V{i}": "x" * 1000 for i in range(1200)}  # ~1.2 MB of env: over the record's 1 MiB
    prof = write_profile(tmp_path / "big.toml", "bigrecord", {"argv": ["sleep", "1"], "port": 1, "env": env})
    res = check(prof)
    assert res.returncode == 2 and "its server record would be about" in res.stderr, res.stderr
    launched = run(sshd, "launch", "gpubox", "-c", str(prof), timeout=60)
    assert launched.returncode == 1 and b"its server record would be about" in launched.stderr
