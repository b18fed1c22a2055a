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


HOSTILE_SERVERS = {
    # a NUL cannot pass through an exec: launch failed on the box ("probe helper: ValueError: embedded
    # null byte") after check said the profile was fine
    "argv-nul": ({"argv": ["sleep", "30\u0000; touch /tmp/x"]}, "server.argv holds a NUL byte"),
    "env-nul": ({"argv": ["sleep", "30"], "env": {"A": "x\u0000y"}}, "server.env A holds a NUL byte"),
    # the launch reports the log path as one line: the old launch started the server and recorded
    # the path's first line, a file it never wrote
    "log-newline": ({"argv": ["sleep", "30"], "log_file": "LOGDIR/a\nb.log"}, "holds a line break"),
    # refused only on the box before ("not a regular file")
    "log-folder": ({"argv": ["sleep", "30"], "log_file": "LOGDIR/"}, "names a folder, not a file"),
}


def test_what_launch_cannot_run_is_refused_by_check_and_by_launch_alike(sshd, tmp_path: Path) -> None:
    """Both run one function (core.control.launch.check_launchable), before any box is asked."""
    from tests.security.boxkit import forget_server, unique

    for kind, (server, why) in HOSTILE_SERVERS.items():
        name = unique(kind)
        spec = {"port": 1, "log_file": str(tmp_path / f"{kind}.log"), **server}
        spec["log_file"] = spec["log_file"].replace("LOGDIR", str(tmp_path))
        prof = write_profile(tmp_path / f"{kind}.toml", name, spec)
        res = check(prof)
        assert res.returncode == 2 and why in res.stderr, (kind, res.stdout, res.stderr)
        try:
            launched = run(sshd, "launch", "gpubox", "-c", str(prof), timeout=60)
        finally:
            forget_server(name)
        said = launched.stderr.decode()
        assert launched.returncode == 1 and why in said, (kind, said)
        assert f"not launching {name}" in said and "Traceback" not in said, (kind, said)
        assert not (tmp_path / "a").exists(), f"{kind}: the server was started"
