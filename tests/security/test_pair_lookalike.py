"""`pair --join NAME` joins only a session whose folder and socket belong to the user its name claims.

Anyone can make `<root>/specdebug-pair.<uid>.<name>/` with any uid in the name.  Before, `--join`
took such a look-alike (ours first, by the uid in the name) and attached to a tmux server of
another user, whose screen could imitate a prompt.  Now it is refused with a sentence naming who
made it, `--list` leaves it out (and says so), and a genuine session is named with its owner before
attaching.  Real Unix users, real tmux servers run as them; we (root) are the one joining.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests import clifork
from tests.pair_harness import can_make_users, shared_root, tmux, unix_users

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(can_make_users() is not None, reason=str(can_make_users())),
]


def specdebug_pair(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env["SPECDEBUG_PAIR_DIR"] = str(root)
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", "pair", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def tmux_server(user: str, folder: Path) -> str:
    """A tmux server run by `user` with its socket in `folder` (a fake prompt on its screen)."""
    sock = str(folder / "tmux.sock")
    r = tmux(sock, "new-session", "-d", "-s", "x", "sh -c 'echo \"$ \"; sleep 600'", user=user)
    assert r.returncode == 0, r.stderr
    return sock


def test_lookalike_sessions_are_refused_and_the_real_owner_is_named(tmp_path: Path) -> None:
    with unix_users(2) as (attacker, friend), shared_root() as root:
        os.chmod(root, 0o1777)  # like /tmp: anyone may make a folder in it
        me, friend_uid = os.getuid(), pwd.getpwnam(friend).pw_uid
        attacker_uid = pwd.getpwnam(attacker).pw_uid
        name = f"s{secrets.token_hex(3)}"
        socks = []
        try:
            # 1. a folder claiming to be OUR session, made by the attacker, with a live server in it
            fake_mine = root / f"specdebug-pair.{me}.{name}"
            subprocess.run(
                ["runuser", "-u", attacker, "--", "mkdir", "-m", "755", str(fake_mine)], check=True
            )
            socks.append((attacker, tmux_server(attacker, fake_mine)))
            r = specdebug_pair(root, "--join", name, "--json")
            assert r.returncode == 2, r.stdout
            assert f"made by {attacker} (uid {attacker_uid})" in r.stderr and "look-alike" in r.stderr, (
                r.stderr
            )
            assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr

            # 2. one claiming to be the friend's session
            team = f"t{secrets.token_hex(3)}"
            fake_friend = root / f"specdebug-pair.{friend_uid}.{team}"
            subprocess.run(
                ["runuser", "-u", attacker, "--", "mkdir", "-m", "755", str(fake_friend)], check=True
            )
            socks.append((attacker, tmux_server(attacker, fake_friend)))
            r = specdebug_pair(root, "--join", team, "--json")
            assert r.returncode == 2 and f"not by {friend}" in r.stderr, r.stderr

            # 3. the friend's folder with the attacker's socket in it (a symlink or a planted socket)
            mixed = f"m{secrets.token_hex(3)}"
            mixed_dir = root / f"specdebug-pair.{friend_uid}.{mixed}"
            subprocess.run(["runuser", "-u", friend, "--", "mkdir", "-m", "1777", str(mixed_dir)], check=True)
            socks.append((attacker, tmux_server(attacker, mixed_dir)))
            r = specdebug_pair(root, "--join", mixed, "--json")
            assert r.returncode == 2 and f"belongs to {attacker}" in r.stderr, r.stderr

            # 4. the friend's genuine session: joined, and named as the friend's before attaching
            real = f"r{secrets.token_hex(3)}"
            real_dir = root / f"specdebug-pair.{friend_uid}.{real}"
            subprocess.run(["runuser", "-u", friend, "--", "mkdir", "-m", "711", str(real_dir)], check=True)
            socks.append((friend, tmux_server(friend, real_dir)))
            r = specdebug_pair(root, "--join", real, "--json")
            assert r.returncode == 0, r.stderr
            info = json.loads(r.stdout)
            assert info["owner"] == friend and info["owner_uid"] == friend_uid
            r = specdebug_pair(root, "--join", real, "--owner", friend)  # no terminal: says whose, stops
            assert f"joining pairing session {real!r} of {friend} (uid {friend_uid})" in r.stdout, r.stdout

            listed = json.loads(specdebug_pair(root, "--list", "--json").stdout)
            assert [s["name"] for s in listed["sessions"]] == [real]
            assert sorted(x.split(":")[0] for x in listed["refused"]) == sorted([name, team, mixed])
        finally:
            for user, sock in socks:
                tmux(sock, "kill-server", user=user)
