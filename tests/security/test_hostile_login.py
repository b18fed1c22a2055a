"""A box whose login does not run commands is not a healthy box (issue 40).

Box users of the test's own whose login shell is a script of the test's (what a ~/.bashrc does,
without depending on the sshd harness's quiet-shell setting, which keeps bash from reading it):
one that runs `exit 0` (the old probe said `connected: true` with every
fact null, exit 0), one that prints a prompt and waits for input (the old reason was empty), one
that prints 1.3 MB before every command (the old probe blamed nvidia-smi for it).  probe and
status must say what the login did, in one line, and a noisy login must not spoil the facts.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.security.boxusers import box_users, cli, skip_reason, users_sshd

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

LOGINS = {
    "exits": "exit 0\n",
    "asks": "printf 'Password: '\nread answer\n",
    "floods": "i=0; while [ $i -lt 20000 ]; do echo 'welcome to the cluster, please read the rules of use'; i=$((i+1)); done\n",
}


@pytest.fixture(scope="module")
def sshd():
    with users_sshd() as server:
        yield server


@pytest.fixture(scope="module")
def users(sshd):
    from tests.security.boxusers import _users_db

    shells = Path(tempfile.mkdtemp(prefix="sdbox-shells-", dir="/tmp"))
    os.chmod(shells, 0o755)
    try:
        with box_users(sshd, len(LOGINS)) as made:
            by_kind = dict(zip(LOGINS, made, strict=True))
            for kind, user in by_kind.items():
                shell = shells / kind
                shell.write_text(f'#!/bin/sh\n{LOGINS[kind]}exec /bin/sh "$@"\n')
                shell.chmod(0o755)
                _users_db(["usermod", "-s", str(shell), user.name]).check_returncode()
            yield by_kind
    finally:
        shutil.rmtree(shells, ignore_errors=True)


def probe(user, timeout: float = 120):
    t0 = time.monotonic()
    res = cli(user, "probe", user.alias, "--json", "--no-agent", timeout=timeout)
    return res, time.monotonic() - t0


def test_a_login_that_exits_is_not_a_healthy_box(users) -> None:
    res, took = probe(users["exits"])
    info = json.loads(res.stdout)
    print(f"probe, login exits: exit {res.returncode} after {took:.1f} s: {info['error']}")
    assert res.returncode == 1 and info["connected"] is False, res.stdout
    assert "login shell did not run specdebug's command: it exited with status 0" in info["error"]
    assert "\n" not in info["error"]

    st = cli(users["exits"], "status", users["exits"].alias, "-c", _profile(users["exits"]), timeout=120)
    print(f"status, login exits: exit {st.returncode}: {st.stdout.strip()} / stderr: {st.stderr.strip()}")
    # said once (a one-box status: the box error on stderr, exit 1)
    said = [
        ln for ln in (st.stdout + st.stderr).splitlines() if "exited with status 0 without running it" in ln
    ]
    assert st.returncode == 1 and len(said) == 1, st.stdout + st.stderr
    assert "login shell ended with status 0" in st.stderr, st.stderr  # what ended the helper's start


def test_a_login_that_asks_for_input_says_so(users) -> None:
    res, took = probe(users["asks"])
    info = json.loads(res.stdout)
    print(f"probe, login asks: exit {res.returncode} after {took:.1f} s: {info['error']}")
    assert res.returncode == 1 and info["connected"] is False
    assert "it asked for input" in info["error"] and "'Password:'" in info["error"], info["error"]


def test_a_login_that_floods_does_not_spoil_the_facts(users) -> None:
    res, took = probe(users["floods"])
    info = json.loads(res.stdout)
    print(
        f"probe, login prints 1.1 MB: exit {res.returncode} after {took:.1f} s, gpu_error {info['gpu_error']}"
    )
    assert res.returncode == 0 and info["connected"] is True, res.stdout
    assert info["hostname"] and info["cpus"] and info["load"] is not None
    assert "welcome to the cluster" not in (info["gpu_error"] or ""), info["gpu_error"]


def _profile(user) -> str:
    """A profile file on this machine (the CLI reads it here; the box is only asked about it)."""
    folder = Path(tempfile.mkdtemp(prefix="sdbox-prof-"))
    path = folder / "p.toml"
    path.write_text('name = "plain"\n[server]\nargv = ["sleep", "1"]\nport = 1\nlog_file = "/tmp/x.log"\n')
    return str(path)


def test_a_flooding_login_still_lists_processes(users) -> None:
    """The 1.3 MB login was also read by the process listing: after the flood was taken for
    nvidia-smi rows, `status` of a launched server said "process listing needs python3 on the box"
    (it is there).  Launch, status and stop of a plain server as that user."""
    from tests.sshd_harness import free_port

    user = users["floods"]
    folder = Path(tempfile.mkdtemp(prefix="sdbox-prof-"))
    name = f"flood-{os.getpid()}"
    profile = folder / "p.toml"
    profile.write_text(
        f'name = "{name}"\n[server]\nargv = ["sh", "-c", "exec sleep 300", "{name}"]\n'
        f'port = {free_port()}\nlog_file = "{user.home}/{name}.log"\nkind = "custom"\n'
    )
    launched = cli(user, "launch", user.alias, "-c", str(profile), timeout=120)
    try:
        assert launched.returncode == 0, launched.stderr
        t0 = time.monotonic()
        st = cli(user, "status", user.alias, "-c", str(profile), timeout=120)
        took = time.monotonic() - t0
        print(f"status of a server behind a 1.1 MB login: exit {st.returncode} after {took:.1f} s")
        assert "needs python3" not in st.stdout + st.stderr, st.stderr
        assert st.returncode == 0 and "running" in st.stdout, st.stdout + st.stderr
    finally:
        stopped = cli(user, "stop", user.alias, "-c", str(profile), "--grace", "2", timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
    assert stopped.returncode == 0 and "needs python3" not in stopped.stderr, stopped.stderr
