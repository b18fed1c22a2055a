"""SlurmTransport: a node of a Slurm allocation (`slurm:JOBID[:NODE]`) as a Transport, without ssh.

Every process is a task of an overlap step of the user's allocation (`srun --jobid J --overlap
-w NODE ...`): the box helper is one long-lived step speaking the same JSON-line protocol as over
SSH on srun's stdin/stdout, and each stream is a step of its own.  `connect()` checks the job runs
and picks the node; when the job itself ended it fails for good (JobGone, naming the job's state).
Servers are launched as steps that hold them (steps.py).  Forwards: a node whose address is
loopback is this machine, so its ports are reached directly; any other node has no forward (the
health check runs on the node instead).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from specdebug.transport.base import NotConnected
from specdebug.transport.local import DirectForward, is_loopback
from specdebug.transport.slurm.job import (
    JobGone,
    SlurmSpec,
    check_step_access,
    job_info,
    node_address,
    srun_argv,
)
from specdebug.transport.slurm.proc import SrunProcess, spawn_srun
from specdebug.transport.slurm.steps import cancel_launch_step, launch_step


class SlurmTransport:
    """One node of an allocation."""

    def __init__(self, spec: str | SlurmSpec) -> None:
        self.spec = spec if isinstance(spec, SlurmSpec) else SlurmSpec.parse(spec)
        self.name = self.spec.text
        self.warnings: list[str] = []
        self.node: str | None = self.spec.node
        self.node_addr: str | None = None
        self._up = False

    @property
    def forwards(self) -> bool:
        """Whether `forward` can reach the node's ports (known once connected)."""
        return is_loopback(self.node_addr)

    async def _pick_node(self) -> str:
        """The node to run on; another user's job is tried once (check_step_access): Slurm's
        refusal is final, so the connect fails at once with its words instead of retrying."""
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
        if info.uid is not None and info.uid != os.getuid():
            await check_step_access(info, node)
        return node

    async def connect(self) -> None:
        node = await self._pick_node()
        self.node = node
        self.node_addr = await node_address(node)
        self._up = True

    async def wait_lost(self) -> None:
        """No lasting link: the helper's step ending is what the box client watches."""
        await asyncio.Event().wait()

    async def close(self) -> None:
        self._up = False

    def abort(self) -> None:
        self._up = False

    def _node(self) -> str:
        if not self._up or self.node is None:
            raise NotConnected(f"{self.name}: not connected")
        return self.node

    async def exec(self, argv: Sequence[str], stdin: bytes | None = None) -> SrunProcess:
        proc = await spawn_srun(srun_argv(self.spec.job, self._node(), argv))
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.write_eof()
        return proc

    async def forward(self, port: int, host: str = "127.0.0.1") -> DirectForward | None:
        return DirectForward(port, host) if self.forwards and is_loopback(host) else None

    def no_forward_reason(self, host: str) -> str:
        return (
            f"node {self.node} is at {self.node_addr or 'an unknown address'}, "
            "not this machine's loopback (checks run on the node instead)"
        )

    async def ping(self) -> float | None:
        return None

    def sessions_full(self) -> bool:
        return False  # no session limit: every exec starts at once

    # ---- job steps -------------------------------------------------------------------------------
    async def launch_step(
        self, argv: Sequence[str], *, name: str, timeout: float = 30.0
    ) -> tuple[int, bytes, str]:
        """Run a launch command as a step that stays while the server it starts lives (steps.py):
        its exit status, output and step id."""
        return await launch_step(self.spec.job, self._node(), argv, name=name, timeout=timeout)

    async def cancel_step(self, step: str) -> None:
        await cancel_launch_step(self.spec.job, step)
