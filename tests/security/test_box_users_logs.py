"""Another box user cannot take over a server's log: default logs are private, planted ones refused.

Over the real sshd, two throwaway box users.  The old default `/tmp/specdebug/<name>.log` let the
other user pre-create `/tmp/specdebug` (mode 777) with a symlink in it: the victim's server output
was appended to a file of the victim's (a stand-in for ~/.bashrc), and the log specdebug reads
could be forged.  Now the default log is in a 0700 folder of the box user's own, and a log whose
folder is not the user's own and private, or that is a symlink, is refused with a sentence.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from tests.security.boxkit import unique, write_profile
from tests.security.boxusers import box_users, cli, shared_tmp, skip_reason, users_sshd
from tests.sshd_harness import free_port

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

SERVER = ["sh", "-c", "echo 'The server is fired up and ready to roll!'; exec sleep 120"]


def _kill_launched(stdout: str) -> None:
    """End the server a launch reported (by its recorded group), if it started at all."""
    try:
        os.killpg(int(json.loads(stdout)["pgid"]), signal.SIGKILL)
    except (ValueError, KeyError, TypeError, ProcessLookupError):
        pass


@pytest.fixture(scope="module")
def sshd():
    with users_sshd() as server:
        yield server


def test_planted_log_folder_and_symlink_are_refused_and_default_log_is_private(sshd, tmp_path: Path) -> None:
    with box_users(sshd, 2) as (victim, attacker), shared_tmp() as shared:
        standin = victim.home / "bashrc"  # a file of the victim's the attacker wants written to
        victim.sh(f"printf 'original\\n' > {standin}")
        planted = shared / "specdebug"
        attacker.sh(f"mkdir -m 777 {planted} && ln -s {standin} {planted}/p.log")

        name = unique("planted")
        prof = write_profile(
            tmp_path / "planted.toml",
            name,
            {"argv": SERVER, "port": free_port(), "kind": "custom", "log_file": f"{planted}/p.log"},
        )
        r = cli(victim, "launch", victim.alias, "-c", str(prof), "--json")
        _kill_launched(r.stdout)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"owned by uid {attacker.uid}" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert standin.read_text() == "original\n"  # nothing appended through the symlink

        # a world-writable folder of the victim's own is refused too (anyone could swap the name)
        open_dir = shared / "mine"
        victim.sh(f"mkdir -m 777 {open_dir} && chmod 777 {open_dir}")
        prof = write_profile(
            tmp_path / "open.toml",
            unique("open"),
            {"argv": SERVER, "port": free_port(), "kind": "custom", "log_file": f"{open_dir}/p.log"},
        )
        r = cli(victim, "launch", victim.alias, "-c", str(prof), "--json")
        _kill_launched(r.stdout)
        assert r.returncode == 1 and "writable by group or others" in r.stderr, r.stderr
        assert not (open_dir / "p.log").exists()

        # a symlink in the victim's own private folder (planted earlier, say) is not followed either
        own = victim.home / "logs"
        victim.sh(f"mkdir -m 700 {own} && ln -s {standin} {own}/p.log")
        prof = write_profile(
            tmp_path / "own.toml",
            unique("own"),
            {"argv": SERVER, "port": free_port(), "kind": "custom", "log_file": f"{own}/p.log"},
        )
        r = cli(victim, "launch", victim.alias, "-c", str(prof), "--json")
        _kill_launched(r.stdout)
        assert r.returncode == 1 and "is a symlink" in r.stderr, r.stderr
        assert standin.read_text() == "original\n"

        # no log_file: the default is in a 0700 folder the victim owns, never a shared one
        prof = write_profile(
            tmp_path / "default.toml",
            unique("default"),
            {"argv": SERVER, "port": free_port(), "kind": "custom"},
        )
        r = cli(victim, "launch", victim.alias, "-c", str(prof), "--json")
        assert r.returncode == 0, r.stderr
        record = json.loads(r.stdout)
        try:
            log = Path(record["log_file"])
            assert log.is_relative_to(victim.home), log
            st = log.parent.lstat()
            assert stat.S_ISDIR(st.st_mode) and st.st_uid == victim.uid and stat.S_IMODE(st.st_mode) == 0o700
            assert log.lstat().st_uid == victim.uid
            r = cli(victim, "stop", victim.alias, "-c", str(prof), "--grace", "2")
            assert r.returncode == 0, r.stderr
        finally:
            _kill_launched(json.dumps(record))
