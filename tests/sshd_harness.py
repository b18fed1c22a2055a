"""A throwaway OpenSSH sshd on 127.0.0.1 for tests and perf scripts.

Real sshd, not a mock: MaxSessions, delayed slot release, root signal refusal and AcceptEnv
behave as on a GPU box.  Keys live in a temp dir; clients reach it only through the generated
ssh_config (alias `gpubox`).  A fake nvidia-smi is first on the sessions' PATH.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.leakcheck import TAG_VAR
from tests.ports import free_port as free_port  # re-exported: tests take it with the harness

FIXTURES = Path(__file__).parent / "fixtures"
# The box user's shell does nothing at start (as the perf scripts' baseline box user): bash sources
# ~/.bashrc for a command sshd runs only as the first shell level, so SHLVL=1 makes the session's
# bash the second.  Else the machine user's dotfiles ran in every session (a pyenv init there: ~95
# processes and 0.17 s a session) and put their PATH before the one set here (python3 was pyenv's shim).
QUIET_SHELL = "SHLVL=1"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # the sessions' PATH after the fixtures' and the venv's bin
SSHD = next((p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.path.exists(p)), None)


def on_session_path(tool: str) -> bool:
    """Whether the box's sessions find `tool`: their PATH has this interpreter's bin folder (the
    venv's, where `pip install py-spy` puts it) before the system's, also where the venv is not
    activated (the README's `.venv/bin/python -m pytest`, so CI's run)."""
    return shutil.which(tool, path=f"{os.path.dirname(sys.executable)}:{SYSTEM_PATH}") is not None


@dataclass
class Sshd:
    workdir: Path
    port: int
    proc: subprocess.Popen
    config_path: Path  # client ssh_config
    known_hosts: Path
    client_key: Path
    host_key_pub: str
    alias: str = "gpubox"
    extra: dict = field(default_factory=dict)

    def write_client_config(
        self, path: Path, known_hosts: Path, alias: str = "gpubox", **options: str
    ) -> Path:
        lines = [
            f"Host {alias}",
            "  HostName 127.0.0.1",
            f"  Port {self.port}",
            f"  User {getpass.getuser()}",
            f"  IdentityFile {self.client_key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {known_hosts}",
        ]
        lines += [f"  {k} {v}" for k, v in options.items()]
        path.write_text("\n".join(lines) + "\n")
        return path

    def kill_sessions(self) -> int:
        """Kill the per-connection sshd processes (server side of every open connection)."""
        killed = 0
        for pid in _children(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        return killed

    def stop(self) -> None:
        self.kill_sessions()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _children(pid: int) -> list[int]:
    """The direct children of our own sshd (the kernel's per-task children lists: no /proc scan)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(c) for c in task.read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def start_sshd(
    workdir: Path,
    *,
    max_sessions: int = 10,
    port: int | None = None,
    wrap: Sequence[str] = (),
    extra_config: tuple[str, ...] = (),
    listen: Sequence[str] = ("127.0.0.1",),
    address_env: Mapping[str, Mapping[str, str]] | None = None,
) -> Sshd:
    """Start sshd; `wrap` prefixes its command (e.g. unshare: a box whose sshd is PID 1 of a namespace);
    `extra_config` lines go first (sshd keeps the first value of a keyword); `listen`: its loopback
    addresses (several: one sshd answers as several hosts, tests/cluster_harness.py); `address_env`:
    listen address -> extra session env (`PATH` goes before the sessions' own), so each "host"
    can have its own box (its own simulated GPUs)."""
    if SSHD is None:
        raise RuntimeError("sshd not found: install openssh-server (apt-get install openssh-server)")
    workdir.mkdir(parents=True, exist_ok=True)
    hostkey, client = workdir / "hostkey", workdir / "client"
    if not hostkey.exists():
        _keygen(hostkey)
    if not client.exists():
        _keygen(client)
    shutil.copy(f"{client}.pub", workdir / "authorized_keys")
    Path("/run/sshd").mkdir(exist_ok=True) if os.geteuid() == 0 else None
    port = port or free_port()
    session_path = ":".join([str(FIXTURES / "bin"), os.path.dirname(sys.executable), SYSTEM_PATH])
    tag = f" {TAG_VAR}={os.environ[TAG_VAR]}" if os.environ.get(TAG_VAR) else ""
    matches: list[str] = []
    for addr, env in (address_env or {}).items():  # a Match block's SetEnv replaces the global one
        path = ":".join([env["PATH"], session_path]) if env.get("PATH") else session_path
        extra = "".join(f" {k}={v}" for k, v in env.items() if k != "PATH")
        matches += [
            f"Match LocalAddress {addr}",
            f"  SetEnv PATH={path} {QUIET_SHELL} SPECDEBUG_TEST_SSHD=1{tag}{extra}",
        ]
    base = [
        f"Port {port}",
        *(f"ListenAddress {addr}" for addr in listen),
        f"HostKey {hostkey}",
        f"PidFile {workdir / 'sshd.pid'}",
        f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "PermitRootLogin prohibit-password",
        "AllowTcpForwarding yes",
        f"MaxSessions {max_sessions}",
        "MaxStartups 100:30:200",
        # the run's tag reaches what a test starts on the box (tests/leakcheck.py)
        f"SetEnv PATH={session_path} {QUIET_SHELL} SPECDEBUG_TEST_SSHD=1{tag}",
        "Subsystem sftp internal-sftp",
    ]
    cfg = workdir / "sshd_config"
    base = [*extra_config, *base]
    cfg.write_text("\n".join([*base, "PerSourcePenalties no", *matches]) + "\n")  # Match blocks last
    if subprocess.run([SSHD, "-t", "-f", str(cfg)], capture_output=True).returncode != 0:
        cfg.write_text("\n".join([*base, *matches]) + "\n")  # OpenSSH < 9.8 does not know PerSourcePenalties
        check = subprocess.run([SSHD, "-t", "-f", str(cfg)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"sshd config rejected: {check.stderr}")
    log = open(workdir / "sshd.log", "ab")
    proc = subprocess.Popen(
        [*wrap, SSHD, "-D", "-e", "-f", str(cfg)], stdout=log, stderr=log, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection((listen[0], port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(workdir / 'sshd.log').read_text()[-2000:]}") from None
            time.sleep(0.05)
    else:
        raise RuntimeError("sshd did not start listening")
    host_pub = (workdir / "hostkey.pub").read_text().split()
    known = workdir / "known_hosts"
    known.write_text("".join(f"[{addr}]:{port} {host_pub[0]} {host_pub[1]}\n" for addr in listen))
    sshd = Sshd(
        workdir=workdir,
        port=port,
        proc=proc,
        config_path=workdir / "ssh_config",
        known_hosts=known,
        client_key=client,
        host_key_pub=f"{host_pub[0]} {host_pub[1]}",
    )
    sshd.write_client_config(sshd.config_path, known)
    return sshd
