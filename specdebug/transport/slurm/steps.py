"""Servers launched as Slurm job steps: a step that lasts as long as its server, and its cancel.

On a cluster a process outlives its step only where the site lets it (proctrack/cgroup ends
everything in the step's cgroup), so a server started through the helper's step would die with
it.  The launch therefore runs as a step of its own (specdebug/box/step_hold.sh: launch.sh, then
wait while the server lives) under an srun that is detached here, in its own session, so the
verb that launched it can exit.  The step id (`JOB.STEP`, from the step's own SLURM_* variables)
goes into the server's record; stop cancels it with `scancel JOB.STEP`.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from specdebug.transport.base import RemoteError
from specdebug.transport.slurm.job import cancel_step, job_steps, srun_argv

STEP_HOLD = resources.files("specdebug.box").joinpath("step_hold.sh").read_text(encoding="utf-8")
# here, in the background of a throwaway sh: srun's output to a file, then its exit status
_DETACH = 'out=$1; shift; { "$@" >"$out" 2>&1 </dev/null; echo "srun-exit $?" >>"$out"; } & exit 0'


def parse_step_output(text: str) -> tuple[int | None, str | None, str, str | None]:
    """(launch rc, step id, the launch's own lines, srun's failure) from the detached srun's file."""
    rc = step = srun_exit = None
    lines = []
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "step" and rest.strip():
            step = rest.strip()
        elif tag == "rc" and rest.strip().isdigit():
            rc = int(rest.strip())
        elif tag == "srun-exit":
            srun_exit = rest.strip()
        else:
            lines.append(line)
    failure = None
    if rc is None and srun_exit is not None:
        failure = "\n".join(lines).strip()[-300:] or f"srun exit status {srun_exit}"
    return rc, step, "\n".join(lines) + "\n", failure


async def launch_step(
    job: str, node: str, argv: Sequence[str], *, name: str, timeout: float = 30.0
) -> tuple[int, bytes, str]:
    """Run `argv` (a launch) on NODE as a step held by step_hold.sh: its exit status, its output
    and the step id."""
    words = srun_argv(job, node, ["sh", "-c", STEP_HOLD, "sh", *argv], name=name)
    folder = Path(tempfile.mkdtemp(prefix="specdebug-step-"))
    out = folder / "srun.out"
    try:
        try:
            subprocess.run(
                ["sh", "-c", _DETACH, "sh", str(out), *words],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                check=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RemoteError(f"cannot start srun for the launch step: {exc}") from exc
        deadline = time.monotonic() + timeout
        while True:
            text = out.read_text(errors="replace") if out.exists() else ""
            rc, step, lines, failure = parse_step_output(text)
            if failure is not None:
                raise RemoteError(f"launch step on {node} failed: {failure}")
            if rc is not None and step is not None:
                return rc, lines.encode(), step
            if time.monotonic() > deadline:
                raise RemoteError(
                    f"launch step on {node} did not report within {timeout:g} s: {text.strip()[-300:]!r}"
                )
            await asyncio.sleep(0.1)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def cancel_launch_step(job: str, step: str, wait_s: float = 15.0) -> None:
    """`scancel JOB.STEP` and wait until squeue no longer lists it (RemoteError if it stays)."""
    if not step.startswith(f"{job}."):
        raise RemoteError(f"step {step!r} is not a step of job {job}")
    await cancel_step(step)
    deadline = time.monotonic() + wait_s
    while step in await job_steps(job):
        if time.monotonic() > deadline:
            raise RemoteError(f"step {step} still listed by squeue {wait_s:g} s after scancel")
        await asyncio.sleep(0.2)
