"""A box for side-by-side timings: a loopback sshd and a throwaway box user whose shell does nothing at start.

Why: root's ~/.bashrc here runs `pyenv init` on every ssh command, which slows every plain `ssh box cmd`
(and made ControlMaster look 10x slower than it is); a user with /bin/sh and an empty home measures what
the tools themselves cost.  Needs root (useradd); otherwise the current user is used and that is said.
The client config has two aliases: `box` (a fresh connection per ssh) and `boxcm` (ControlMaster auto,
ControlPersist, a socket in the box's temp folder), both for the same user and key.
"""

from __future__ import annotations

import contextlib
import getpass
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sshd_harness import Sshd, start_sshd  # noqa: E402


@dataclass
class CleanBox:
    sshd: Sshd
    config: Path
    user: str
    clean_shell: bool  # False: the current user (not root, no useradd), whose shell may do work at start
    alias: str = "box"
    cm_alias: str = "boxcm"


@contextlib.contextmanager
def clean_box() -> Iterator[CleanBox]:
    work = Path(tempfile.mkdtemp(prefix="cleanbox-"))
    work.chmod(0o755)  # the user's sshd child reads authorized_keys from here
    made: str | None = None
    server = start_sshd(work / "sshd")
    (work / "sshd").chmod(0o755)
    try:
        user, clean = getpass.getuser(), False
        if os.geteuid() == 0 and shutil.which("useradd"):
            made = f"sdperf{secrets.token_hex(3)}"
            home = work / "home"
            home.mkdir()
            subprocess.run(
                ["useradd", "-M", "-N", "-d", str(home), "-s", "/bin/sh", "-p", "*", made],
                check=True,
                capture_output=True,
            )
            pw = pwd.getpwnam(made)
            os.chown(home, pw.pw_uid, pw.pw_gid)
            user, clean = made, True
        config = work / "ssh_config"
        common = [
            "  HostName 127.0.0.1",
            f"  Port {server.port}",
            f"  User {user}",
            f"  IdentityFile {server.client_key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {server.known_hosts}",
            "  BatchMode yes",
        ]
        cm = ["  ControlMaster auto", f"  ControlPath {work}/cm-%r@%h:%p", "  ControlPersist 120"]
        config.write_text("\n".join(["Host box", *common, "Host boxcm", *common, *cm]) + "\n")
        yield CleanBox(sshd=server, config=config, user=user, clean_shell=clean)
    finally:
        subprocess.run(["ssh", "-F", str(work / "ssh_config"), "-O", "exit", "boxcm"], capture_output=True)
        server.stop()
        if made:
            subprocess.run(["pkill", "-KILL", "-u", made], capture_output=True)
            subprocess.run(["userdel", "-f", made], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def describe(box: CleanBox) -> str:
    """One line for a perf script's header: whose shell the timings went through."""
    if box.clean_shell:
        return f"box user {box.user}: /bin/sh, empty home (a shell that does nothing at start)"
    return f"box user {box.user} (not root: could not make a clean user; its shell start-up is included)"
