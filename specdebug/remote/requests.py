"""Short commands without the helper: one process per request on the transport, output bounded.

Used where the box has no python3 helper (or the caller asked for none): a command runs under the
stdin-EOF watchdog, or, when it reads stdin itself, tells its PID first so one that outruns its
timeout or its output bound is ended on the box.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from specdebug.remote.api import RemoteError, RunResult
from specdebug.remote.boxcode import (
    FRAME,
    SPAWN_ERR_SH,
    SPAWN_WAIT_S,
    end_spawned_argv,
    ended_note,
    spawned_pid,
)
from specdebug.remote.shell import watchdog_argv
from specdebug.transport.base import Process, Transport
from specdebug.transport.teardown import best_effort

FRAME_B = FRAME.encode()
RUN_OUTPUT_MAX = 8 << 20  # bytes kept of a command's stdout and of its stderr (box/helper.py's bound)


async def run_exec(
    transport: Transport,
    argv: Sequence[str],
    *,
    timeout: float | None,
    input: bytes | None,
    cap: int = 0,
) -> RunResult:
    """Run argv as its own process; stdout and stderr kept up to `cap` (RUN_OUTPUT_MAX) each."""
    name = transport.name
    # with input the command reads stdin itself, so it cannot sit under the stdin watchdog: it
    # tells its PID first (on stderr), by which a command past its timeout is ended
    words = ["sh", "-c", SPAWN_ERR_SH, "sh", *argv] if input is not None else watchdog_argv(argv)
    proc = await transport.exec(words, input)
    out, err = bytearray(), bytearray()
    try:
        try:
            over = await asyncio.wait_for(_read_both(proc, out, err, cap or RUN_OUTPUT_MAX), timeout)
        except TimeoutError:
            outcome = RunResult(exit_status=None, timed_out=True)
        else:
            if not over:
                status = await proc.wait()
                return RunResult(exit_status=status, stdout=bytes(out), stderr=_unspawn(err))
            outcome = RunResult(exit_status=None, truncated=True)
        # past its bound: with input, ended by its PID; else closing the channel ends the watchdog
        note = await _end_timed_out(transport, proc, err) if input is not None else ""
        return replace(outcome, stdout=bytes(out), stderr=_unspawn(err), end_note=note)
    finally:
        with best_effort("%s: close a finished command", name):
            proc.close()


async def _end_timed_out(transport: Transport, proc: Process, err: bytearray) -> str:
    """End a command that outran its timeout or its output bound (its PID is on stderr; a
    session slow to start is given SPAWN_WAIT_S to tell it); says what was done."""
    name = transport.name
    with best_effort("%s: wait for a command's PID", name):
        async with asyncio.timeout(SPAWN_WAIT_S):
            while spawned_pid(bytes(err)) is None:
                data = await proc.stderr.read(1 << 16)
                if not data:
                    break
                err += data[: RUN_OUTPUT_MAX - len(err)]
    pid = spawned_pid(bytes(err))
    if pid is None:
        return f"could not end it: it did not tell its PID within {SPAWN_WAIT_S:g} s more"
    return f"{await end_spawned(transport, pid)} (PID {pid})"


async def end_spawned(transport: Transport, pid: int) -> str:
    """End a command started under SPAWN_SH / SPAWN_ERR_SH by its PID (a helper that never greeted,
    a request past its bound); says what was done, "ended it" only once the PID is gone."""
    try:
        killer = await asyncio.wait_for(transport.exec(end_spawned_argv(pid), b""), 10)
        try:
            status = await asyncio.wait_for(killer.wait(), 10)
        finally:
            killer.close()
    except (RemoteError, OSError, TimeoutError) as exc:
        return f"could not end it: {exc or type(exc).__name__}"
    return ended_note(status)


async def _read_capped(stream: Any, sink: bytearray, cap: int = RUN_OUTPUT_MAX) -> bool:
    """Read a process stream into `sink` (kept there if cut short); True when it passed the cap."""
    while True:
        data = await stream.read(1 << 16)
        if not data:
            return False
        sink += data[: cap + 1 - len(sink)]
        if len(sink) > cap:  # one byte past the cap: it printed more than is kept
            del sink[cap:]
            return True


async def _read_both(proc: Process, out: bytearray, err: bytearray, cap: int) -> bool:
    """stdout and stderr to their ends; True (and the other left) as soon as one passes the cap."""
    tasks = {
        asyncio.ensure_future(_read_capped(proc.stdout, out, cap)),
        asyncio.ensure_future(_read_capped(proc.stderr, err, cap)),
    }
    try:
        while tasks:
            done, tasks = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if any(t.result() for t in done):
                return True
        return False
    finally:
        for t in tasks:
            t.cancel()


def _unspawn(err: bytearray) -> bytes:
    """stderr without the PID frame SPAWN_ERR_SH wrote first."""
    data = bytes(err)
    at = data.find(FRAME_B)
    if at < 0:
        return data
    end = data.find(b"\n", at)
    return data[:at] + (data[end + 1 :] if end >= 0 else b"")
