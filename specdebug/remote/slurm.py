"""SlurmRemote: a node of a Slurm allocation (`slurm:JOBID[:NODE]`) as a Remote, without ssh.

The box helper (specdebug/box/helper.py) runs on the node as one long-lived overlap step
(`srun --jobid J --overlap -w NODE python3 -u -c ...`) and speaks the same JSON-line protocol as
over SSH, on srun's stdin/stdout.  A supervisor keeps that step: when it ends it is started again
with backoff, unless the job itself ended (then the host is FAILED, naming the job's state).
Streams are steps of their own (slurm_ops.py); servers are launched as steps that hold them
(slurm_steps.py).  Port forwards: a node whose address is loopback is this machine, so its ports
are reached directly; any other node has no forward ("no forward" is what forward_local_port
says, and the health check runs on the node instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from specdebug.remote.api import ConnState, ConnStatus, NotConnected, RemoteError, RunResult
from specdebug.remote.boxcode import helper_command
from specdebug.remote.probe import ProbeChannel
from specdebug.remote.slurm_job import (
    JobGone,
    SlurmMissing,
    SlurmSpec,
    is_loopback,
    job_info,
    node_address,
    srun_argv,
)
from specdebug.remote.slurm_ops import DirectForward, SlurmRemoteAPI, StderrTail, end_process, spawn_srun
from specdebug.remote.slurm_steps import cancel_launch_step, launch_step

log = logging.getLogger("specdebug.remote")

BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0


class _Pipe:
    """srun's pipes as the reader/writer pair ProbeChannel talks to."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.stdin, self.stdout, self.stderr = proc.stdin, proc.stdout, proc.stderr

    def close(self) -> None:
        if self.stdin is not None:
            self.stdin.close()


class SlurmRemote(SlurmRemoteAPI):
    """One node of an allocation.  Create, `await start()`, use the Remote API, `await close()`."""

    def __init__(
        self, spec: str | SlurmSpec, *, state_dir: str | None = None, connect_timeout: float = 30.0
    ) -> None:
        self.spec = spec if isinstance(spec, SlurmSpec) else SlurmSpec.parse(spec)
        self.name = self.spec.text
        self.state_dir = state_dir or os.environ.get("SPECDEBUG_STATE_DIR") or None
        self.warnings: list[str] = []
        self.node: str | None = self.spec.node
        self.node_addr: str | None = None
        self.helper_info: dict[str, Any] | None = None
        self._connect_timeout = connect_timeout
        self._status = ConnStatus(ConnState.CONNECTING)
        self._listeners: list[Callable[[ConnStatus], None]] = []
        self._probe: ProbeChannel | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: StderrTail | None = None
        self._connected = asyncio.Event()
        self._failed = asyncio.Event()
        self._failure: Exception | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._generation = 0

    # ---- state -------------------------------------------------------------------------------
    @property
    def status(self) -> ConnStatus:
        return self._status

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def forwards(self) -> bool:
        """Whether forward_local_port can reach the node's ports (known once connected)."""
        return is_loopback(self.node_addr)

    def subscribe(self, listener: Callable[[ConnStatus], None]) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe

    def _set_status(self, status: ConnStatus) -> None:
        self._status = status
        for cb in list(self._listeners):
            try:
                cb(status)
            except Exception:  # a listener's bug must not stop the connection
                log.debug("%s: status listener %r failed", self.name, cb, exc_info=True)

    async def start(self) -> None:
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name=f"slurm:{self.name}")

    async def restart(self) -> None:
        if self._supervisor is not None and not self._supervisor.done():
            return
        self._failure = None
        self._failed.clear()
        self._supervisor = None
        await self.start()

    async def wait_connected(self, timeout: float | None = None) -> None:
        await self.start()

        async def _wait() -> None:
            while not self._connected.is_set():
                if self._status.state is ConnState.FAILED:
                    raise self._failure or NotConnected(f"{self.name}: {self._status.last_error}")
                done = asyncio.ensure_future(self._connected.wait())
                failed = asyncio.ensure_future(self._failed.wait())
                try:
                    await asyncio.wait({done, failed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    done.cancel()
                    failed.cancel()

        try:
            await asyncio.wait_for(_wait(), timeout)
        except TimeoutError as exc:
            raise NotConnected(
                f"{self.name}: no helper step after {timeout} s ({self._status.last_error or self._status.state.value})"
            ) from exc

    # ---- the helper step ---------------------------------------------------------------------
    async def _pick_node(self) -> str:
        info = await job_info(self.spec.job)
        if not info.running:
            raise JobGone(f"{self.name}: job {self.spec.job} is {info.state}, not running")
        if self.spec.node is not None and self.spec.node not in info.nodes:
            raise JobGone(
                f"{self.name}: node {self.spec.node} is not in job {self.spec.job} ({', '.join(info.nodes)})"
            )
        node = self.spec.node or (info.nodes[0] if info.nodes else None)
        if node is None:
            raise JobGone(f"{self.name}: job {self.spec.job} has no nodes")
        return node

    async def _connect_once(self) -> None:
        node = await self._pick_node()
        self.node = node
        self.node_addr = await node_address(node)
        proc = await spawn_srun(
            srun_argv(self.spec.job, node, ["sh", "-c", helper_command()], name="specdebug-helper")
        )
        probe = ProbeChannel(_Pipe(proc), errors=(OSError, ConnectionError, ValueError))
        try:
            self.helper_info = await probe.start(timeout=self._connect_timeout)
        except BaseException:
            await end_process(proc, 1.0)
            raise
        self._proc, self._probe = proc, probe
        self._stderr = StderrTail(proc.stderr)  # read from now on: a full pipe would stall the helper

    async def _supervise(self) -> None:
        delay = BACKOFF_START_S
        attempt = 0
        last_error: str | None = None
        while not self._closing:
            attempt += 1
            state = ConnState.CONNECTING if self._generation == 0 else ConnState.RECONNECTING
            self._set_status(ConnStatus(state, attempt=attempt, last_error=last_error))
            try:
                await self._connect_once()
            except asyncio.CancelledError:
                raise
            except (JobGone, SlurmMissing) as exc:  # retrying cannot bring them back
                self._fail(exc)
                return
            except (RemoteError, OSError, TimeoutError, ValueError) as exc:
                last_error = str(exc) or type(exc).__name__
                log.info("%s: helper step attempt %d failed: %s", self.name, attempt, last_error)
                self._set_status(ConnStatus(ConnState.RECONNECTING, attempt=attempt, last_error=last_error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP_S)
                continue
            self._generation += 1
            attempt, delay = 0, BACKOFF_START_S
            self._set_status(ConnStatus(ConnState.CONNECTED, rtt_ms=await self._measure_rtt()))
            self._connected.set()
            last_error = await self._watch()
            self._connected.clear()
            await self._teardown()
        self._set_status(ConnStatus(ConnState.CLOSED))

    def _fail(self, exc: Exception) -> None:
        self._failure = exc
        self._set_status(ConnStatus(ConnState.FAILED, last_error=str(exc)))
        self._failed.set()

    async def _watch(self) -> str:
        assert self._proc is not None and self._probe is not None
        ended = asyncio.ensure_future(self._proc.wait())
        closed = asyncio.ensure_future(self._probe.closed.wait())
        try:
            while True:
                done, _ = await asyncio.wait(
                    {ended, closed}, timeout=5.0, return_when=asyncio.FIRST_COMPLETED
                )
                if done:
                    return "the helper's job step ended"
                rtt = await self._measure_rtt()
                if rtt is not None:
                    self._set_status(ConnStatus(ConnState.CONNECTED, rtt_ms=rtt))
        finally:
            ended.cancel()
            closed.cancel()

    async def _teardown(self) -> None:
        probe, proc, stderr = self._probe, self._proc, self._stderr
        self._probe = self._proc = self._stderr = None
        if probe is not None:
            probe.close()
        if proc is not None:
            await end_process(proc, 1.0)
        if stderr is not None:
            stderr.cancel()

    async def _measure_rtt(self) -> float | None:
        if self._probe is None:
            return None
        try:
            t0 = time.perf_counter()
            await self._probe.request("ping", 5.0)
            return (time.perf_counter() - t0) * 1000
        except RemoteError:
            return None

    async def ready(self, timeout: float | None) -> tuple[str, ProbeChannel]:
        if not self._connected.is_set():
            await self.wait_connected(timeout if timeout is not None else 30.0)
        if self._probe is None or self.node is None:
            raise NotConnected(f"{self.name}: not connected")
        return self.node, self._probe

    async def close(self) -> None:
        self._closing = True
        await self._teardown()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
        self._set_status(ConnStatus(ConnState.CLOSED))

    # ---- forwards and job steps --------------------------------------------------------------
    async def forward_local_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> DirectForward:
        await self.ready(30.0)
        if self.forwards and is_loopback(remote_host):
            return DirectForward(remote_port)
        raise RemoteError(
            f"{self.name}: no forward: node {self.node} is at {self.node_addr or 'an unknown address'}, "
            "not this machine's loopback (checks run on the node instead)"
        )

    async def launch_step(
        self, argv: Sequence[str], *, name: str, timeout: float = 30.0
    ) -> tuple[RunResult, str]:
        """Run a launch command as a step that stays while the server it starts lives (slurm_steps.py)."""
        node, _ = await self.ready(timeout)
        return await launch_step(self.spec.job, node, argv, name=name, timeout=timeout)

    async def cancel_step(self, step: str) -> None:
        await cancel_launch_step(self.spec.job, step)
