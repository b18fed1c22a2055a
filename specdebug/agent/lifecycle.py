"""The agent process: its lock, its socket, its life until idle, and what it warms first.

Apart from server.py (one request: checks, the verb, its output): this is the process around it.

The verb that started the agent comes on stdin (`{"warm": [verb, argv...], "after": PID}`, never on
the command line, which every local user can read).  The agent listens at once, but opens that
verb's connection only once the caller (PID) has ended: its imports and the SSH handshake would
else take the CPU from the very verb the user is waiting for (a first call took 1.47 s where the same
call without an agent took 1.08 s, load 12, two cores).  A request that comes before is served as
usual (it connects itself).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from specdebug.agent import AGENT_VERBS
from specdebug.agent.paths import is_private, pid_path
from specdebug.agent.server import DEFAULT_IDLE_S, MAX_REQUEST, Agent, _parser, _Routed

LOCK_WAIT_S = 10.0  # a new agent waits this long for the one it replaces to let go of the socket
AFTER_CALLER_S = 30.0  # the prewarm waits at most this long for the verb that started the agent to end
CALLER_POLL_S = 0.05


async def caller_gone(pid: int | None, limit_s: float = AFTER_CALLER_S) -> None:
    """Return once process `pid` has ended (or after `limit_s`; at once for no pid)."""
    from specdebug.agent.client import process_state

    deadline = time.monotonic() + limit_s
    while pid and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return  # not ours: the pid was reused
        if process_state(pid) == "ended (a zombie)":  # ended, its parent has not waited for it yet
            return
        await asyncio.sleep(CALLER_POLL_S)


async def prewarm(agent: Agent, verb_argv: list[str], after: int | None = None) -> None:
    """Open the connection the verb that started this agent needed, so the next one finds it warm;
    once that verb's process (`after`) has ended."""
    await caller_gone(after)
    try:
        if verb_argv and verb_argv[0] in AGENT_VERBS:
            args, _ = _parser(verb_argv[0]).parse_known_args(verb_argv[1:])
            if getattr(args, "host", None):
                _, check = await agent.kept.get(args.host, args)
                if check is not None:
                    await check
    except (Exception, SystemExit):
        pass  # the next request connects and reports in the verb's own words


async def _take_lock(path: Path) -> Any:
    """The agent's pid file, locked for its life; None when another agent keeps it past LOCK_WAIT_S
    (one this agent replaces lets go within that time)."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        lock = open(path, "a+")  # noqa: SIM115 - held for the agent's life
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # the agent that let go removes its pid file first: a lock on that removed file is no lock
            if os.fstat(lock.fileno()).st_ino == os.stat(path).st_ino:
                return lock
        except OSError:
            pass
        lock.close()
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(0.1)


async def serve(
    sock_path: Path, idle_s: float, warm: list[str] | None = None, after: int | None = None
) -> int:
    """Run until idle; 0 also when another agent already serves this socket."""
    if not is_private(sock_path.parent):
        return 2
    lock = await _take_lock(pid_path(sock_path))
    if lock is None:
        return 0  # another agent holds it
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    sock_path.unlink(missing_ok=True)
    agent = Agent(sock_path, idle_s)
    old_umask = os.umask(0o177)
    try:
        server = await asyncio.start_unix_server(agent.handle, path=str(sock_path), limit=MAX_REQUEST)
    finally:
        os.umask(old_umask)
    import signal

    for signum in (signal.SIGTERM, signal.SIGHUP):
        asyncio.get_running_loop().add_signal_handler(signum, agent.done.set)
    watch = asyncio.ensure_future(agent.idle_watch())
    warming = asyncio.ensure_future(prewarm(agent, warm or [], after))
    try:
        await agent.done.wait()
    finally:
        watch.cancel()
        warming.cancel()
        server.close()
        sock_path.unlink(missing_ok=True)
        await agent.kept.close_all()
        pid_path(sock_path).unlink(missing_ok=True)
        lock.close()
    return 0


def _read_warm(stdin: Any) -> tuple[list[str], int | None]:
    """The verb that started this agent and its process, from stdin (see the module's docstring;
    a bare JSON list is the verb alone); nothing when stdin says nothing."""
    try:
        if stdin is None or stdin.isatty():
            return [], None
        raw = stdin.buffer.readline(MAX_REQUEST) if hasattr(stdin, "buffer") else b""
        told = json.loads(raw or b"[]")
    except (OSError, ValueError, TypeError):
        return [], None
    warm, after = (told.get("warm"), told.get("after")) if isinstance(told, dict) else (told, None)
    verb = [str(a) for a in warm] if isinstance(warm, list) else []
    return verb, after if isinstance(after, int) and not isinstance(after, bool) and after > 1 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdebug.agent", description="specdebug's local agent")
    ap.add_argument("--socket", required=True, help="the socket to serve (in the user's private folder)")
    ap.add_argument(
        "--idle", type=float, default=float(os.environ.get("SPECDEBUG_AGENT_IDLE_S", DEFAULT_IDLE_S))
    )
    args = ap.parse_args(argv)
    warm, after = _read_warm(sys.stdin)
    sys.stdout = _Routed("o", None)
    sys.stderr = _Routed("e", None)
    return asyncio.run(serve(Path(args.socket), args.idle, warm, after))
