"""A cold one-shot verb's connection through the system's `ssh` (OpenSSH), asyncssh where it cannot.

Why: a fresh `ssh box cmd` pays OpenSSH's handshake in C; the same question through asyncssh paid
its import (~180 ms: `python -c 'import asyncssh'` against `python -c pass`, interleaved) and its
handshake in Python, most of a cold `status`/`env` (issue 43).  Here one master connection
(`ssh -M -S SOCKET -N`, in a private temporary folder, ended with the verb) carries every process
the verb starts (`ssh -S SOCKET host -- COMMAND`, the command quoted in the one place remote commands
are quoted: transport/ssh/quote.py).  OpenSSH reads ~/.ssh/config (or -F) exactly as it always does:
aliases, ProxyJump, IdentityFile, known_hosts.  What specdebug decides stays decided on the command
line: host keys are verified (StrictHostKeyChecking=yes, or accept-new with --accept-new-host-key;
no key is learnt behind the user's back), no password prompt (BatchMode), no forwards the config asks
for, no control socket of the config's.

Whenever this path cannot serve (no `ssh` binary, an address it does not take, a master that ended
before it came up: a refused key, a refused login, a ProxyCommand that failed), the transport becomes
the asyncssh one and connects again: a failure is reported in the direct path's own words.  Never
because the master is slow: it is waited for as long as it runs (its ConnectTimeout is the user's
connect timeout; the verb's own wait bounds the rest).  A master that ended for a network reason (an
unknown name, a refused or timed-out connection, no route) is not followed by a second attempt
through asyncssh, which would pay the same timeout again: its line is the connect error, which the
verb words as the direct path does (verbs/connecting.py: fast failures, "not connected after S s").
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence

from specdebug.transport.base import Forward, NotConnected, Process, Transport
from specdebug.transport.local import LocalProcess, spawn
from specdebug.transport.ssh.quote import sh_join

_SPEC = re.compile(r"(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s]+)(?::(?P<port>\d+))?")
SOCKET_POLL_S = 0.005  # how often the master's control socket is looked for while it connects
LOST_POLL_S = 0.25  # how often a connected master is looked at (a one-shot verb's link)
MASTER_EXIT_WAIT_S = 2.0
# a Unix socket's path: sun_path less its NUL (104 on the BSDs and macOS, 108 on Linux: the smaller);
# OpenSSH binds CONTROL.<16 random characters> first and links it to CONTROL, so that name must fit.
# A longer one made the master exit at once (a deep TMPDIR, as pytest-xdist's), and asyncssh served.
SUN_PATH_MAX = 103
OPENSSH_BIND_SUFFIX = 17
# what ssh says when the host cannot be reached: asyncssh could not reach it either
_NETWORK_FAILURES = (
    "could not resolve hostname",
    "connection refused",
    "connection timed out",
    "operation timed out",
    "network is unreachable",
    "no route to host",
)


def _socket_folder() -> str | None:
    """A private (0700) folder whose control socket's name OpenSSH can bind: under TMPDIR, else
    under /tmp where TMPDIR is too deep; None where neither is."""
    for base in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        try:
            folder = tempfile.mkdtemp(prefix="sdssh-", dir=base)
        except OSError:
            continue
        if len(os.path.join(folder, "c")) + OPENSSH_BIND_SUFFIX <= SUN_PATH_MAX:
            return folder
        os.rmdir(folder)
    return None


def network_failure(said: str) -> str | None:
    """ssh's last line where it says the host could not be reached (no second attempt helps)."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    low = "\n".join(lines).lower()
    return lines[-1] if lines and any(needle in low for needle in _NETWORK_FAILURES) else None


def ssh_argv(text: str, ssh_config: str | None) -> list[str] | None:
    """`[-F cfg] [-p PORT] [-l USER] HOST` for an SSH address as specdebug reads it (HOST,
    user@HOST, user@HOST:PORT, [v6]:PORT, ssh://ALIAS); None for what it leaves to asyncssh
    (another scheme, a malformed spec, a config file that is not there: the direct path's words)."""
    if text.startswith(("slurm:", "local:", "k8s:")):
        return None
    target = text[len("ssh://") :] if text.startswith("ssh://") else text
    m = _SPEC.fullmatch(target)
    if m is None or m["host"].startswith("-") or (m["user"] or "").startswith("-"):
        return None
    argv: list[str] = []
    if ssh_config is not None:
        path = os.path.expanduser(str(ssh_config))
        if not os.path.isfile(path):
            return None
        argv += ["-F", path]
    if m["port"]:
        port = int(m["port"])
        if not 0 < port < 65536:
            return None
        argv += ["-p", str(port)]
    if m["user"]:
        argv += ["-l", m["user"]]
    return [*argv, m["host"].strip("[]")]


def _options(accept_new: bool, connect_timeout: float) -> list[str]:
    """What specdebug decides whatever the config says (command-line -o wins over the config)."""
    return [
        "-o", "BatchMode=yes",
        "-o", f"StrictHostKeyChecking={'accept-new' if accept_new else 'yes'}",
        "-o", "UpdateHostKeys=no",
        "-o", "ClearAllForwardings=yes",
        "-o", "PermitLocalCommand=no",
        "-o", "RemoteCommand=none",  # the config's would refuse our command
        "-o", f"ConnectTimeout={max(1, round(connect_timeout))}",
        "-o", "LogLevel=ERROR",
    ]  # fmt: skip


class Master:
    """An OpenSSH master connection (`ssh -M -N`) and its control socket in a private folder."""

    def __init__(self, ssh: str, options: list[str], target: list[str]) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        folder = _socket_folder()  # 0700: the control socket is ours alone
        self.folder = folder or ""
        self.control = os.path.join(self.folder, "c")
        self.said = os.path.join(self.folder, "said")  # the master's stderr: why it ended, if it did
        if folder is None:
            return
        argv = [
            ssh,
            *options,
            "-o", "ControlMaster=yes",
            "-o", f"ControlPath={self.control}",
            "-o", "ControlPersist=no",
            "-N",
            *target,
        ]  # fmt: skip
        try:
            with open(self.said, "wb") as said:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=said,
                    start_new_session=True,  # a Ctrl-C at the terminal is the verb's to handle, not ssh's
                )
        except OSError:
            self.end()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def up(self) -> bool:
        """Whether the master came up (its control socket is there: OpenSSH makes it after the
        handshake, the host key check and the login) before it ended."""
        while self.running():
            if os.path.exists(self.control):
                return True
            await asyncio.sleep(SOCKET_POLL_S)
        return False

    def network_failure(self) -> str | None:
        """Why the master ended, where that was the network (see network_failure)."""
        if not self.folder:  # never started: no folder fitted
            return None
        try:
            with open(self.said, encoding="utf-8", errors="replace") as f:
                return network_failure(f.read(4096))
        except OSError:
            return None

    async def lost(self) -> None:
        while self.running():
            await asyncio.sleep(LOST_POLL_S)

    def end(self) -> None:
        """TERM, then KILL; the folder removed (a bounded wait: this runs at exit too)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            deadline = time.monotonic() + MASTER_EXIT_WAIT_S
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


_EARLY: dict[tuple[object, ...], Master] = {}


def start_early(text: str, ssh_config: str | None, *, accept_new: bool, connect_timeout: float) -> None:
    """Start the master for this login now, while the verb imports what it runs (~0.4 s of Python):
    OpenSSH's handshake runs beside it.  The verb's transport adopts it; one nobody adopted is ended
    at exit."""
    ssh = _ssh_binary()
    target = ssh_argv(text, ssh_config)
    key = (text, ssh_config, accept_new, round(connect_timeout))
    if ssh is None or target is None or key in _EARLY:
        return
    if not _EARLY:
        atexit.register(_end_early)
    _EARLY[key] = Master(ssh, _options(accept_new, connect_timeout), target)


def _end_early() -> None:
    while _EARLY:
        _EARLY.popitem()[1].end()


def _ssh_binary() -> str | None:
    if os.environ.get("SPECDEBUG_OPENSSH", "").lower() in ("0", "no", "off", "false"):
        return None
    return shutil.which("ssh")


class OpenSSHTransport:
    """One host through OpenSSH's master connection; `fallback()` makes the asyncssh transport this
    one becomes when the master does not come up."""

    def __init__(
        self,
        name: str,
        ssh: str,
        target: list[str],
        fallback: Callable[[], Transport],
        *,
        ssh_config: str | None = None,
        accept_new: bool = False,
        connect_timeout: float = 10.0,
    ) -> None:
        self.name = name
        self.warnings: list[str] = []
        self._ssh = ssh
        self._target = target  # [-F cfg] [-p port] [-l user] host
        self._fallback_factory = fallback
        self.fallback: Transport | None = None
        self._key = (name, ssh_config, accept_new, round(connect_timeout))
        self._options = _options(accept_new, connect_timeout)
        self._master: Master | None = None
        self._procs: set[LocalProcess] = set()
        self._watchers: set[asyncio.Task[None]] = set()

    async def connect(self) -> None:
        if self.fallback is not None:
            await self.fallback.connect()
            return
        master = _EARLY.pop(self._key, None) or Master(self._ssh, self._options, self._target)
        if await master.up():
            self._master = master
            return
        unreachable = master.network_failure()
        master.end()
        if unreachable is not None:  # asyncssh would wait for the same host again: no second attempt
            raise OSError(unreachable)
        self.fallback = self._fallback_factory()
        self.warnings[:] = self.fallback.warnings
        self.fallback.warnings = self.warnings  # one list, as the session holds it
        await self.fallback.connect()

    async def wait_lost(self) -> None:
        if self.fallback is not None:
            await self.fallback.wait_lost()
        elif self._master is not None:
            await self._master.lost()

    async def close(self) -> None:
        if self.fallback is not None:
            await self.fallback.close()
            return
        procs = list(self._procs)
        if procs:
            await asyncio.gather(*(p.wait_closed(1.0) for p in procs), return_exceptions=True)
        master, self._master = self._master, None
        if master is not None:
            await asyncio.get_running_loop().run_in_executor(None, master.end)

    def abort(self) -> None:
        if self.fallback is not None:
            self.fallback.abort()
            return
        for p in list(self._procs):
            p.dropped = True
            p.kill()
        if self._master is not None and self._master.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self._master.proc.kill()

    async def exec(self, argv: Sequence[str], stdin: bytes | None = None) -> Process:
        if self.fallback is not None:
            return await self.fallback.exec(argv, stdin)
        if self._master is None or not self._master.running():
            raise NotConnected(f"{self.name}: not connected")
        command = sh_join([str(a) for a in argv])
        words = [
            self._ssh,
            *self._options,
            "-o", "ControlMaster=no",
            "-o", f"ControlPath={self._master.control}",
            "-T",
            *self._target,
            "--",
            command,
        ]  # fmt: skip
        proc = LocalProcess(await spawn(words))
        self._procs.add(proc)
        watcher = asyncio.ensure_future(self._forget_when_done(proc))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        if stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                proc.stdin.write(stdin)
                proc.stdin.write_eof()
        return proc

    async def _forget_when_done(self, proc: LocalProcess) -> None:
        with contextlib.suppress(Exception):
            await proc.proc.wait()
        self._procs.discard(proc)

    async def forward(self, port: int, host: str = "127.0.0.1") -> Forward | None:
        if self.fallback is not None:
            return await self.fallback.forward(port, host)
        return None

    def no_forward_reason(self, host: str) -> str:
        if self.fallback is not None:
            return self.fallback.no_forward_reason(host)
        return "a one-shot verb's OpenSSH connection forwards no port"

    async def ping(self) -> float | None:
        return await self.fallback.ping() if self.fallback is not None else None

    def sessions_full(self) -> bool:
        return self.fallback.sessions_full() if self.fallback is not None else False


def openssh_transport(
    text: str,
    ssh_config: str | None,
    fallback: Callable[[], Transport],
    *,
    accept_new: bool = False,
    connect_timeout: float = 10.0,
) -> OpenSSHTransport | None:
    """The OpenSSH transport for an SSH address; None where this path does not serve (no `ssh`
    binary, SPECDEBUG_OPENSSH=0, an address left to asyncssh)."""
    ssh = _ssh_binary()
    target = ssh_argv(text, ssh_config)
    if ssh is None or target is None:
        return None
    return OpenSSHTransport(
        text,
        ssh,
        target,
        fallback,
        ssh_config=ssh_config,
        accept_new=accept_new,
        connect_timeout=connect_timeout,
    )
