"""Two bisections on one box name each other instead of fighting for its GPUs (issue 40).

Before: a second `bisect` on a box where one already ran launched its trials beside the first's,
and both read the failures as "not enough memory".  Now a bisection holds the box's lock from its
first launch (core/bisect/boxlock.py, box/bisect_lock.py), and a second one, of the same box user
or another, is refused before it launches anything, naming the first (its profiles, client user,
host and PID, box user).  The records are the box users' own: folder 0711, record 0644, owner
checked, never followed through a link; a holder killed without its TERM blocks nothing.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from specdebug.remote.boxcode import source
from tests import clifork
from tests.bisectprofiles import CULPRIT, write_pair
from tests.pair_harness import can_make_users, unix_users
from tests.sshd_harness import Sshd

pytestmark = [pytest.mark.slow]

FIRST = {
    "bisect": "b0first",
    "good": "first-good",
    "bad": "first-bad",
    "client_host": "laptop-a",
    "client_user": "alice",
    "pid": 4242,
}


def _holder(root: Path, user: str | None = None) -> subprocess.Popen:
    """The box-side lock holder, as `user` (or as us), the way the first bisection runs it."""
    python = "/usr/bin/python3" if user is not None else sys.executable  # the box's, reachable by all
    argv = [python, "-c", source("bisect_lock.py"), str(root), json.dumps(FIRST)]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "held", line
    return proc


def _end(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(10)


def _bisect(sshd: Sshd, tmp: Path, root: Path) -> tuple[subprocess.CompletedProcess, float]:
    good, bad = write_pair(tmp / "pair", bad_flags=[CULPRIT], tag="lock-")
    env = {**os.environ, "SPECDEBUG_BISECT_LOCKS": str(root)}
    cmd = [sys.executable, "-m", "specdebug.cli", "bisect", "-F", str(sshd.config_path), "gpubox"]
    cmd += ["--good", str(good), "--bad", str(bad), "--session", str(tmp / "session"), "--json"]
    t0 = time.monotonic()
    res = clifork.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    return res, time.monotonic() - t0


def _lock_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="sdlock-", dir="/tmp"))
    os.chmod(root, 0o1777)  # like /tmp, the default: every box user makes their own folder in it
    return root


def _assert_refused(res: subprocess.CompletedProcess, box_user: str, tmp: Path) -> None:
    text = res.stderr + res.stdout
    assert res.returncode != 0, text[-2000:]
    assert "another bisection runs on gpubox" in text, text[-2000:]
    for said in ("first-good vs first-bad", "alice@laptop-a", "PID 4242", f"box user {box_user}"):
        assert said in text, (said, text[-2000:])
    assert "not enough memory" not in text
    assert not list((tmp / "pair").glob("*.log")), "a trial was launched beside the first bisection"


def test_a_second_bisection_of_the_same_user_is_refused_naming_the_first(sshd: Sshd, tmp_path: Path) -> None:
    root = _lock_root()
    first = _holder(root)
    try:
        folder = root / f"specdebug-bisect.{os.getuid()}"
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o711
        assert stat.S_IMODE((folder / "bisect.json").lstat().st_mode) == 0o644
        res, took = _bisect(sshd, tmp_path, root)
        print(f"second bisection (same box user) refused after {took:.1f} s: {res.stderr.strip()[-300:]}")
        _assert_refused(res, "root" if os.getuid() == 0 else str(os.getuid()), tmp_path)
    finally:
        _end(first)
        subprocess.run(["rm", "-rf", str(root)], check=False)
    assert not (folder / "bisect.json").exists(), "the holder left its record after TERM"


@pytest.mark.skipif(can_make_users() is not None, reason=str(can_make_users()))
def test_a_bisection_of_another_box_user_is_named_and_a_dead_one_blocks_nothing(
    sshd: Sshd, tmp_path: Path
) -> None:
    root = _lock_root()
    with unix_users(1) as (other,):
        first = _holder(root, other)
        try:
            res, took = _bisect(sshd, tmp_path, root)
            print(f"second bisection (another box user) refused after {took:.1f} s")
            _assert_refused(res, other, tmp_path)
        finally:
            _end(first, signal.SIGKILL)  # killed without its TERM: its record stays, stale
        try:
            stale = root / f"specdebug-bisect.{int(subprocess.check_output(['id', '-u', other]))}"
            assert (stale / "bisect.json").exists()
            again = _holder(root)  # the stale record blocks nobody
            _end(again)
        finally:
            subprocess.run(["rm", "-rf", str(root)], check=False)
