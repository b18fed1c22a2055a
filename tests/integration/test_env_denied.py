"""`denied` on another user's process, on its row only, over a real sshd login as a non-root user.

Root can read every /proc/PID/environ (CAP_SYS_PTRACE), so the check must run as an ordinary user:
a throwaway account logs in to a throwaway sshd (its authorized_keys in a world-readable temp dir).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests import clifork
from tests.sshd_harness import start_sshd

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root and useradd to create a throwaway user",
)


@pytest.fixture
def throwaway_user():
    name = f"sdenv{os.getpid() % 100000}"
    home = Path(tempfile.mkdtemp(prefix="sdenv-home-"))
    subprocess.run(
        ["useradd", "-M", "-d", str(home), "-s", "/bin/sh", "-p", "*", name], check=True, capture_output=True
    )
    pw = pwd.getpwnam(name)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    try:
        yield pw
    finally:
        subprocess.run(["userdel", "-f", name], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def user_sshd(sshd, throwaway_user):  # sshd: skip without OpenSSH
    workdir = Path(tempfile.mkdtemp(prefix="sdenv-sshd-"))
    workdir.chmod(0o755)  # the user's sshd child reads authorized_keys from here
    server = start_sshd(workdir)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _sleeper(env_mark: str, user: pwd.struct_passwd | None = None) -> subprocess.Popen:
    argv = ["env", f"SDENV_MARK={env_mark}", "sleep", "120"]
    if user is not None:
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *argv]
    return subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL)


def test_other_users_process_is_denied_on_its_row_only(user_sshd, throwaway_user, tmp_path):
    cfg = tmp_path / "ssh_config"
    user_sshd.write_client_config(cfg, user_sshd.known_hosts)
    cfg.write_text(
        cfg.read_text().replace(f"User {pwd.getpwuid(os.getuid()).pw_name}", f"User {throwaway_user.pw_name}")
    )
    mine = _sleeper("1", throwaway_user)
    roots = _sleeper("1")
    try:
        time.sleep(0.2)  # let env exec sleep
        r = clifork.run(
            [
                sys.executable,
                "-m",
                "specdebug.cli",
                "env",
                "-F",
                str(cfg),
                "gpubox",
                "--pid",
                str(roots.pid),
                "--pid",
                str(mine.pid),
                "--expect",
                "SDENV_MARK=1",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 1, r.stderr
        rows = {w["pid"]: w for w in json.loads(r.stdout)["workers"]}
        assert rows[roots.pid]["environ_state"] == "denied"
        assert rows[roots.pid]["user"] == "root"
        assert rows[roots.pid]["vars"]["SDENV_MARK"]["status"] == "unverifiable"
        assert rows[mine.pid]["environ_state"] == "readable"
        assert rows[mine.pid]["user"] == throwaway_user.pw_name
        assert rows[mine.pid]["vars"]["SDENV_MARK"]["status"] == "ok"
        assert f"pid {roots.pid}, user root) is not readable" in r.stderr
    finally:
        for p in (mine, roots):
            p.kill()
            p.wait()
