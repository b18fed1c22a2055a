"""Box clients for tests, built the one way the product builds them (a transport under BoxClient).

`ssh_box` is a client of a real sshd (tests/sshd_harness.py); `local_box` makes this machine the box
(LocalTransport: the helper, streams and one-shot ops run here as subprocesses).  Where no process
may run (snapshots, pure logic), the stand-ins at the end are the only ones: no other test module
defines a Remote stand-in of its own (tests/unit/test_layering.py checks it).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from specdebug.remote.api import ConnState, ConnStatus, FileRead, ProcInfo, RemoteError, RunResult
from specdebug.remote.client import BoxClient
from specdebug.transport.local import LocalTransport
from specdebug.transport.ssh.options import SSHOptions
from specdebug.transport.ssh.transport import SSHTransport

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def ssh_box(spec: str, *, state_dir: str | None = None, use_helper: bool = True, **ssh: Any) -> BoxClient:
    """A client of an SSH host (`ssh` are SSHOptions' fields: ssh_config, on_host_key, ...)."""
    return BoxClient(SSHTransport(spec, SSHOptions(**ssh)), state_dir=state_dir, use_helper=use_helper)


def local_env(gpus_csv: Path | None = None, **extra: str) -> dict[str, str]:
    """This machine's environment with the fake nvidia-smi first on PATH (tests/fixtures/bin)."""
    env = dict(os.environ, PATH=f"{FIXTURES / 'bin'}{os.pathsep}{os.environ['PATH']}", **extra)
    if gpus_csv is not None:
        env["SPECDEBUG_FAKE_GPUS"] = str(gpus_csv)
    return env


def local_box(
    name: str = "local",
    *,
    env: Mapping[str, str] | None = None,
    state_dir: str | None = None,
    use_helper: bool = True,
) -> BoxClient:
    """This machine as the box; start it (`await box.wait_connected()`) and close it like any other."""
    return BoxClient(LocalTransport(name, env=env), state_dir=state_dir, use_helper=use_helper)


# --- the only stand-ins for a box: pure rendering and pure logic, where no process may run -----------


class FixedLifecycle:
    """The Connection lifecycle of a stand-in whose state never changes (start, restart: counted,
    nothing else; listeners are kept, never called)."""

    warnings: list[str] = []
    generation = 0
    state_dir: str | None = None

    def __init__(self, name: str, status: ConnStatus | None = None) -> None:
        self.name = name
        self.status = status or ConnStatus(ConnState.CONNECTED, rtt_ms=1.2)
        self.listeners: list[Callable[[ConnStatus], None]] = []
        self.started = 0

    async def start(self) -> None:
        self.started += 1

    async def restart(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def subscribe(self, listener: Callable[[ConnStatus], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener) if listener in self.listeners else None


class StillRemote(FixedLifecycle):
    """A box frozen in one state: never answers, so panes render only what tests feed (snapshots)."""

    async def wait_connected(self, timeout: float | None = None) -> None:
        await asyncio.Event().wait()


class TableBox(FixedLifecycle):
    """A box known only by a fixed process table and files (the env check's logic and rendering).

    `run` greps `log` for the pattern after `-e` (exit 2 when there is no log) unless `run_answer`
    is given; `box_ops` answers box operations by name, `"*"` any other (an op it does not answer
    fails as on a box without python3).  Every request is recorded in `calls`."""

    def __init__(
        self,
        name: str = "fake",
        procs: Sequence[ProcInfo] = (),
        files: Mapping[str, FileRead] | None = None,
        *,
        log: str | None = None,
        run_answer: RunResult | None = None,
        box_ops: Mapping[str, dict[str, Any]] | None = None,
        status: ConnStatus | None = None,
    ) -> None:
        super().__init__(name, status or ConnStatus(ConnState.CONNECTED))
        self.procs = list(procs)
        self.files = dict(files or {})
        self.log = log
        self.run_answer = run_answer
        self.box_ops = dict(box_ops or {})
        self.calls: list[Any] = []

    async def wait_connected(self, timeout: float | None = None) -> None:
        return None

    async def processes(self, **_filter: object) -> list[ProcInfo]:
        self.calls.append("ps")
        return self.procs

    async def read_files(self, paths: Sequence[str], *, max_bytes: int = 1 << 20) -> list[FileRead]:
        self.calls.append(("read", tuple(paths)))
        return [self.files.get(p, FileRead(p, error="ENOENT")) for p in paths]

    async def run(self, argv: Sequence[str], **_: object) -> RunResult:
        self.calls.append(("run", tuple(argv)))
        if self.run_answer is not None:
            return self.run_answer
        if self.log is None:
            return RunResult(2, b"", b"grep: x.log: No such file or directory\n")
        words = list(argv)
        hits = [ln for ln in self.log.splitlines() if words[words.index("-e") + 1] in ln]
        return RunResult(0 if hits else 1, "\n".join(hits).encode())

    async def box_op(self, op: str, args: Mapping[str, Any], **_: object) -> dict[str, Any]:
        answer = self.box_ops.get(op, self.box_ops.get("*"))
        if answer is None:
            raise RemoteError(f"box operation {op} failed: no python3")  # as `run` fails here
        return answer


class UntouchableBox:
    """A box that must never be used: any request fails the test (a replay that needs no launch)."""

    state_dir = None  # the default box folder of server records

    def __init__(self, name: str = "nobox") -> None:
        self.name = name

    def __getattr__(self, item: str) -> Any:
        raise AssertionError(f"the test touched the box: {item}")
