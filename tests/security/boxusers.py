"""Other users on the box: throwaway Unix users (with homes) who log in over the real sshd.

A shared GPU box has several users; the attacks of the multi-user tier are one of them planting
files, folders or sessions for another.  Each user is created by the test (`sdbox_<random>`), gets
a home under a 0711 root of the test's own, and is removed with it afterwards.  The sshd harness
takes the same client key for any user (its AuthorizedKeysFile is one file), so logging in as a
user is one more Host block in an ssh config of the test's own.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests import clifork
from tests.pair_harness import _users_db, can_make_users
from tests.sshd_harness import start_sshd


def skip_reason() -> str | None:
    return can_make_users()


@dataclass
class BoxUser:
    name: str
    uid: int
    gid: int
    home: Path
    alias: str  # the Host of this user in `config`
    config: Path  # ssh config logging in as this user

    def sh(self, script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run `sh -c SCRIPT` as this user on the box (the box is this machine)."""
        r = subprocess.run(
            ["runuser", "-u", self.name, "--", "sh", "-c", script, "sh", *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        if check:
            assert r.returncode == 0, f"as {self.name}: {script}: {r.stderr}"
        return r


@contextlib.contextmanager
def shared_tmp() -> Iterator[Path]:
    """A sticky, world-writable folder like /tmp, of this test only."""
    root = Path(tempfile.mkdtemp(prefix="sdbox-tmp-", dir="/tmp"))
    os.chmod(root, 0o1777)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def box_users(
    sshd, n: int, *, group: str | None = None, in_group: int | None = None
) -> Iterator[list[BoxUser]]:
    """`n` users with homes who can log in over `sshd`; with `group`, the first `in_group` (default:
    all) are in that new group."""
    tag = secrets.token_hex(3)
    root = Path(tempfile.mkdtemp(prefix="sdbox-home-", dir="/tmp"))
    os.chmod(root, 0o711)
    made: list[str] = []
    made_group = None
    try:
        extra: list[str] = []
        if group is not None:
            _users_db(["groupadd", group]).check_returncode()
            made_group = group
            extra = ["-G", group]
        users = []
        for i in range(n):
            name = f"sdbox_{tag}{i}"
            home = root / name
            member = extra if in_group is None or i < in_group else []
            _users_db(
                ["useradd", "-m", "-d", str(home), "-N", "-s", "/bin/sh", *member, name]
            ).check_returncode()
            made.append(name)
            pw = pwd.getpwnam(name)
            _users_db(["usermod", "-p", "*", name]).check_returncode()  # no password, not locked (sshd)
            os.chmod(home, 0o700)
            config = root / f"{name}.ssh_config"
            sshd.write_client_config(config, sshd.known_hosts, alias=f"as-{name}")
            text = config.read_text().replace(
                f"  User {pwd.getpwuid(os.getuid()).pw_name}\n", f"  User {name}\n"
            )
            config.write_text(text)
            users.append(BoxUser(name, pw.pw_uid, pw.pw_gid, home, f"as-{name}", config))
        yield users
    finally:
        for name in made:
            _users_db(["userdel", name])
        if made_group is not None:
            _users_db(["groupdel", made_group])
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def users_sshd() -> Iterator:
    """The real sshd, in a folder every box user can pass through: sshd reads a user's
    authorized_keys as that user (the session fixture's lives in pytest's 0700 folder)."""
    root = Path(tempfile.mkdtemp(prefix="sdbox-sshd-", dir="/tmp"))
    os.chmod(root, 0o711)
    server = start_sshd(root / "sshd")
    os.chmod(root / "sshd", 0o711)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def cli(user: BoxUser, verb: str, *args: str, timeout: float = 120, env: dict | None = None):
    """`specdebug VERB -F <user's ssh config> ARGS...` as this machine's user, logging in as `user`.

    Without SPECDEBUG_STATE_DIR: the box-side records and default logs go to the user's throwaway
    home (~/.specdebug), which is what a real user gets."""
    full = {k: v for k, v in os.environ.items() if k != "SPECDEBUG_STATE_DIR"}
    full.update(env or {})
    cmd = [sys.executable, "-m", "specdebug.cli", verb, "-F", str(user.config), *args]
    return clifork.run(cmd, capture_output=True, text=True, timeout=timeout, env=full)
