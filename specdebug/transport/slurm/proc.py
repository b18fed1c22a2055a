"""srun here, as the Slurm transport's processes: each exec is one task of an overlap step.

A step's process is a subprocess of this machine (srun), so it is a LocalProcess whose `lost()`
says whether srun itself failed (the job ended, the node went) rather than the command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from specdebug.transport.local import LocalProcess, spawn
from specdebug.transport.slurm.job import SlurmMissing

# A step whose task died by a signal takes slurmstepd about 3 s to end, hence the grace
STEP_END_GRACE_S = 5.0


class SrunProcess(LocalProcess):
    """One srun: EOF first (the watchdog ends the step's group), then TERM (srun cancels the
    step), then KILL; srun's own signals, never its group's (the task is on the node)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        super().__init__(proc, grace_s=STEP_END_GRACE_S, group=False)

    async def lost(self) -> bool:
        return "srun: error" in await self.stderr.text()


async def spawn_srun(argv: Sequence[str]) -> SrunProcess:
    """srun here, with pipes, in its own session: a Ctrl-C at the terminal reaches us, not srun
    (which would only print the step's status on a first SIGINT); we end it ourselves."""
    try:
        return SrunProcess(await spawn(argv))
    except FileNotFoundError as exc:
        raise SlurmMissing("srun not found: the Slurm client programs are not installed here") from exc
