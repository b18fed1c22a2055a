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
# Told on stdout and stderr once the login has handed over to our command: what comes before it
# is the login's own output (a ~/.bashrc that echoes), never the command's; no mark at all means
# the login never ran the command (a ~/.bashrc that runs `exit 0`, one that waits for input).
RAN_MARK = FRAME + "ran"
RAN_B = RAN_MARK.encode()
RAN_SH = f"printf '\\n%s\\n' '{RAN_MARK}'; printf '\\n%s\\n' '{RAN_MARK}' >&2; exec \"$@\""


class LoginDidNotRun(RemoteError):
    """The box's login shell did not run the command (what it did instead: the message)."""


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
    proc = await transport.exec(["sh", "-c", RAN_SH, "sh", *words], input)
    out, err = bytearray(), bytearray()
    try:
        try:
            over = await asyncio.wait_for(_read_both(proc, out, err, cap or RUN_OUTPUT_MAX), timeout)
        except TimeoutError:
            if _prompted(out, err):  # a login asking for input: no time past the bound will help
                raise LoginDidNotRun(f"{name}: {login_did(bytes(out), bytes(err), None, timeout)}") from None
            outcome = RunResult(exit_status=None, timed_out=True)  # a slow login too: ended below
        else:
            if not over:
                status = await proc.wait()
                _check_ran(name, out, err, status, timeout)
                return RunResult(
                    exit_status=status,
                    stdout=_after_mark(out),
                    stderr=_unspawn(err),
                    login_output=_login_lines(out),
                )
            outcome = RunResult(exit_status=None, truncated=True)
        # past its bound: with input, ended by its PID; else closing the channel ends the watchdog
        note = await _end_timed_out(transport, proc, err) if input is not None else ""
        return replace(
            outcome,
            stdout=_after_mark(out),
            stderr=_unspawn(err),
            end_note=note,
            login_output=_login_lines(out),
        )
    finally:
        with best_effort("%s: close a finished command", name):
            proc.close()


async def _end_timed_out(transport: Transport, proc: Process, err: bytearray) -> str:
    """End a command that outran its timeout or its output bound (its PID is on stderr; a
    session slow to start is given SPAWN_WAIT_S to tell it); says what was done."""
    name = transport.name
    with best_effort("%s: wait for a command's PID", name):
        async with asyncio.timeout(SPAWN_WAIT_S):
            while spawned_pid(_after_mark(err)) is None:
                data = await proc.stderr.read(1 << 16)
                if not data:
                    break
                err += data[: RUN_OUTPUT_MAX - len(err)]
    pid = spawned_pid(_after_mark(err))
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


def _after_mark(data: bytearray | bytes) -> bytes:
    """A stream without the login's output and the RAN mark line (as it is when there is no mark)."""
    data = bytes(data)
    at = data.find(RAN_B)
    if at < 0:
        return data
    end = data.find(b"\n", at)
    return data[end + 1 :] if end >= 0 else b""


def _login_lines(out: bytearray) -> tuple[str, ...]:
    """The lines the login printed on stdout before the command (counted in the warning; bounded
    by the output cap)."""
    at = bytes(out).find(RAN_B)
    head = bytes(out[: at if at >= 0 else 0]).decode("utf-8", "replace")
    return tuple(ln[:200] for ln in head.splitlines() if ln.strip())


def _prompted(out: bytearray, err: bytearray) -> bool:
    """No RAN mark yet, and the last thing printed reads like a prompt (`Password: `, `[y/N]?`)."""
    if RAN_B in out or RAN_B in err:
        return False
    tail = (bytes(out[-200:]) + b"\n" + bytes(err[-200:])).decode("utf-8", "replace")
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return any(ln.endswith((":", "?", ">")) for ln in lines[-2:])


def _check_ran(name: str, out: bytearray, err: bytearray, status: int | None, timeout: float | None) -> None:
    """LoginDidNotRun when neither stream holds the RAN mark: one line saying what the login did."""
    if RAN_B in out or RAN_B in err:
        return
    raise LoginDidNotRun(f"{name}: {login_did(bytes(out), bytes(err), status, timeout)}")


def login_did(out: bytes, err: bytes, status: int | None, timeout: float | None) -> str:
    """What a login that never ran the command did, in one line (its printed lines counted, the
    last one quoted: a prompt is what it asked)."""
    text = (out + b"\n" + err).decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    last = "".join(c if c.isprintable() else "?" for c in lines[-1].strip())[:120] if lines else ""
    printed = (
        f", after printing {len(lines)} line{'s' if len(lines) != 1 else ''} (last: {last!r})"
        if lines
        else ""
    )
    if status is None:
        asked = " (it asked for input)" if last.endswith((":", "?", ">")) else ""
        what = (
            f"waited {timeout:g} s without running it{asked}{printed}"
            if timeout
            else f"did not run it{printed}"
        )
    else:
        what = f"exited with status {status} without running it{printed}"
    return (
        f"the box's login shell did not run specdebug's command: it {what}; "
        "check the login files (~/.bashrc, ~/.profile) for exit, read or exec lines"
    )


def _unspawn(err: bytearray) -> bytes:
    """stderr without the login's output, the RAN mark and the PID frame SPAWN_ERR_SH wrote first."""
    data = _after_mark(err)
    at = data.find(FRAME_B)
    if at < 0:
        return data
    end = data.find(b"\n", at)
    return data[:at] + (data[end + 1 :] if end >= 0 else b"")
