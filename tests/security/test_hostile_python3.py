"""A box whose python3 hangs is named as such, within the verb's deadline, and left clean (issue 40).

The box's sessions find a `python3` of the test's first on PATH that tells its PID and sleeps (what a
broken module shim or a python3 waiting on a dead NFS mount does).  Before: `status` waited its
connect timeout and said "not connected after 15.0 s (connecting)", as if the box could not be
reached, and left the `sleep` running on the box.  Now it says the login works and python3 did not
answer, in one line, and the hanging python3 is ended.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.security.cli_run import run_cli
from tests.sshd_harness import start_sshd

CONNECT_TIMEOUT_S = 6


@pytest.fixture
def hanging_box(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pids = tmp_path / "python3.pids"
    python3 = bin_dir / "python3"
    python3.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 3600\n")
    python3.chmod(0o755)
    server = start_sshd(tmp_path / "sshd", address_env={"127.0.0.1": {"PATH": str(bin_dir)}})
    try:
        yield server, pids
    finally:
        for pid in _pids(pids):  # whatever the code under test left: the test cleans up its own
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        server.stop()


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_status_names_a_hanging_python3_within_its_deadline_and_ends_it(hanging_box, tmp_path: Path) -> None:
    sshd, pids = hanging_box
    profile = tmp_path / "p.toml"
    profile.write_text('name = "plain"\n[server]\nargv = ["sleep", "1"]\nport = 1\nlog_file = "/tmp/x.log"\n')
    t0 = time.monotonic()
    res = run_cli(
        "status", "-F", str(sshd.config_path), "--connect-timeout", str(CONNECT_TIMEOUT_S),
        "-c", str(profile), "gpubox", timeout=120,
    )  # fmt: skip
    took = time.monotonic() - t0
    lines = [ln for ln in res.err.splitlines() if ln.strip() and "hint:" not in ln]
    print(f"status on a box whose python3 hangs: exit {res.rc} after {took:.1f} s: {lines}")
    assert res.rc != 0, res.err + res.out
    assert len(lines) == 1 and "python3 on the box did not answer" in lines[0], res.err
    assert "not connected after" not in res.err, res.err
    started = _pids(pids)
    assert started, "the box's python3 never ran"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(_alive(p) for p in started):
        time.sleep(0.05)
    assert not [p for p in started if _alive(p)], "the hanging python3 was left running on the box"
