"""Joining another user's pairing session asks first, or needs --owner USER (issue 40).

An attacker's session that is the only one with a name was joined at once by `pair --join NAME`,
after one line naming the other owner; the victim typed a password into the attacker's pane (a
look-alike prompt).  Now, at a terminal, the join asks ("Join? [y/N]") and attaches only on yes; with
no terminal and no --owner it is refused in one line naming the owner and --owner; --owner naming
someone else is refused.  Real users, a real tmux server run as the other user, a real pty.
"""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pair_harness import Terminal, can_make_users, pair_cli, shared_root, tmux, unix_users, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(can_make_users() is not None, reason=str(can_make_users())),
]

PROMPT = "Join? [y/N]"


def _clients(sock: str, user: str) -> list[str]:
    r = tmux(sock, "list-clients", "-F", "#{client_pid}", user=user)
    return r.stdout.split()


def _join_terminal(root: Path, *args: str) -> Terminal:
    env = {**os.environ, "SPECDEBUG_PAIR_DIR": str(root)}
    return Terminal([sys.executable, "-m", "specdebug.cli", "pair", "--join", *args], env=env, size=(120, 30))


def test_joining_another_users_session_asks_or_needs_owner() -> None:
    with unix_users(2) as (other, bystander), shared_root() as root:
        os.chmod(root, 0o1777)  # like /tmp: the other user makes their folder in it
        uid = pwd.getpwnam(other).pw_uid
        name = f"j{secrets.token_hex(3)}"
        folder = root / f"specdebug-pair.{uid}.{name}"
        subprocess.run(["runuser", "-u", other, "--", "mkdir", "-m", "711", str(folder)], check=True)
        sock = str(folder / "tmux.sock")
        started = tmux(
            sock, "new-session", "-d", "-s", name, "sh -c 'printf \"Password: \"; sleep 600'", user=other
        )
        assert started.returncode == 0, started.stderr
        terms: list[Terminal] = []
        try:
            # 1. at a terminal: it asks, and "n" attaches nothing
            t0 = time.monotonic()
            term = _join_terminal(root, name)
            terms.append(term)
            wait_for(lambda: PROMPT in term.text() or _clients(sock, other), 30, what="the question")
            print(f"asked after {time.monotonic() - t0:.2f} s: {term.text().strip()[-160:]!r}")
            assert PROMPT in term.text() and f"{other}'s session" in term.text(), term.text()
            assert _clients(sock, other) == [], "attached before the answer"
            term.type("n\r")
            assert term.wait_exit(20) == 2, term.text()
            assert "not joined" in term.text() and _clients(sock, other) == []

            # 2. "y" attaches
            term = _join_terminal(root, name)
            terms.append(term)
            wait_for(lambda: PROMPT in term.text(), 30, what="the question")
            term.type("y\r")
            wait_for(lambda: _clients(sock, other), 20, what="the attached client")

            # 3. no terminal, no --owner: one line naming the owner and --owner
            r = pair_cli(root, "--join", name)
            print(f"no terminal: exit {r.returncode}: {r.stderr.strip()}")
            assert r.returncode == 2, r.stdout + r.stderr
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert f"{other}'s" in r.stderr and f"--owner {other}" in r.stderr, r.stderr

            # 4. --owner naming someone else: refused, nothing attached
            r = pair_cli(root, "--join", name, "--owner", bystander)
            assert r.returncode == 2 and f"not {bystander}'s" in r.stderr, r.stdout + r.stderr
        finally:
            for term in terms:
                term.close()
            tmux(sock, "kill-server", user=other)
