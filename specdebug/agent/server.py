"""The agent process: a Unix-socket server that runs verbs on kept connections.

One request per socket connection: `{"v", "verb", "argv", "env", "identity"}` in, then at once
`{"accepted": pid}` or `{"refused": true, "why", "replace"}`, then `{"o": text}` / `{"e": text}` lines
(the verb's stdout and stderr, in order), `{"alive": 1}` every ALIVE_S while the verb runs, and one
`{"rc": code}`.  The verb runs through the same parser and function as on the direct path; only
`open_remote` differs (verbs.common.KEPT: a connection kept per login, with its resident helper).

A peer of another uid is refused; so is a request of another protocol, of other settings (the
environment the verb would see differs from the caller's: it runs directly) or of other code or
another interpreter (an upgrade: this agent then retires, and the caller starts a new one).  The
agent ends after `idle_s` with no request, closing its connections and removing its socket.  Its
command line names only its socket: the verb that started it comes on stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import fcntl
import inspect
import io
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specdebug.agent.client import AGENT_VERBS, ALIVE_S, PROTOCOL
from specdebug.agent.paths import (
    caller_env,
    code_identity,
    env_differences,
    env_fingerprint,
    is_private,
    pid_path,
)
from specdebug.agent.pool import KeptConnections

DEFAULT_IDLE_S = 600.0
MAX_REQUEST = 1 << 20
LOCK_WAIT_S = 10.0  # a new agent waits this long for the one it replaces to let go of the socket

_SINK: contextvars.ContextVar[Callable[[str, str], None] | None] = contextvars.ContextVar(
    "sink", default=None
)


class _Routed(io.TextIOBase):
    """sys.stdout/sys.stderr in the agent: text goes to the request that printed it."""

    def __init__(self, kind: str, fallback: Any) -> None:
        self.kind, self.fallback = kind, fallback

    def write(self, text: str) -> int:
        sink = _SINK.get()
        if sink is None:
            return self.fallback.write(text) if self.fallback else len(text)
        sink(self.kind, text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    return int(struct.unpack("3i", raw)[1])


class Agent:
    def __init__(self, sock_path: Path, idle_s: float = DEFAULT_IDLE_S) -> None:
        self.sock_path = sock_path
        self.idle_s = idle_s
        self.kept = KeptConnections()
        self.active = 0
        self.last = time.monotonic()
        self.fingerprint = env_fingerprint()
        self.env = caller_env()
        self.identity = code_identity()
        self.retiring = ""  # why this agent ends once its requests are done (other code asked)
        self.served = 0
        self.done = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.active += 1
        try:
            if peer_uid(writer) != os.getuid():
                return
            try:
                request = json.loads(await reader.readline())
            except (ValueError, asyncio.LimitOverrunError):
                return
            if isinstance(request, dict) and request.get("control") in ("status", "stop"):
                writer.write(json.dumps(self._control(request["control"])).encode() + b"\n")
                await writer.drain()
                return
            refusal = self._refusal(request)
            if refusal is not None:
                writer.write(json.dumps({"refused": True, **refusal}).encode() + b"\n")
                await writer.drain()
                return
            writer.write(json.dumps({"accepted": os.getpid()}).encode() + b"\n")
            self.served += 1
            rc = await self._run(request["verb"], request["argv"], writer)
            writer.write(json.dumps({"rc": rc}).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.active -= 1
            self.last = time.monotonic()
            writer.close()
            if self.retiring and self.active == 0:
                self.done.set()

    def _control(self, what: str) -> dict[str, Any]:
        if what == "stop":
            self.done.set()
        return {
            "pid": os.getpid(),
            "socket": str(self.sock_path),
            "hosts": self.kept.hosts(),
            "active": self.active - 1,  # this status request is not one
            "served": self.served,
            "idle_s": round(time.monotonic() - self.last, 1),
            "idle_limit_s": self.idle_s,
            "stopping": self.done.is_set() or bool(self.retiring),
            "identity": self.identity,
            "env": self.env,  # the caller (same uid, checked) compares names only
        }

    def _refusal(self, request: Any) -> dict[str, Any] | None:
        """Why this agent must not run the request (None: it runs it).  Other code or another
        interpreter: this agent retires (the caller starts one of its own code); other settings: the
        caller runs the verb itself, in its own environment."""
        if not isinstance(request, dict) or request.get("v") != PROTOCOL:
            return {"why": "another protocol", "replace": True, "stopping": self._retire("another protocol")}
        theirs = request.get("identity")
        if theirs != self.identity:
            why = _identity_difference(self.identity, theirs)
            return {"why": why, "replace": True, "stopping": self._retire(why)}
        env = request.get("env")
        if not isinstance(env, dict) or env != self.env:
            names = env_differences(self.env, env if isinstance(env, dict) else {})
            return {"why": f"it runs with another {', '.join(names) or 'environment'}", "replace": False}
        if (
            request.get("verb") not in AGENT_VERBS
            or not isinstance(request.get("argv"), list)
            or not all(isinstance(a, str) for a in request["argv"])
        ):
            return {"why": "a verb the agent does not run", "replace": False}
        return None

    def _retire(self, why: str) -> bool:
        """End once the requests in flight are done (the one refused counts as none)."""
        self.retiring = why
        if self.active <= 1:
            self.done.set()
        return True

    async def _run(self, verb: str, argv: list[str], writer: asyncio.StreamWriter) -> int:
        from specdebug.errors import SpecdebugError
        from specdebug.verbs.common import KEPT, VerbExit, fail
        from specdebug.verbs.table import verb_parser

        def sink(kind: str, text: str) -> None:
            writer.write(json.dumps({kind: text}).encode() + b"\n")

        async def beat() -> None:  # the caller takes a quiet agent for a stuck one
            while True:
                await asyncio.sleep(ALIVE_S)
                writer.write(b'{"alive": 1}\n')

        heartbeat = asyncio.ensure_future(beat())
        tokens = (_SINK.set(sink), KEPT.set(self.kept.get))
        try:
            args, extras = verb_parser(verb).parse_known_args(argv)
            if extras:
                sys.stderr.write(f"specdebug {verb}: unrecognized arguments: {' '.join(extras)}\n")
                return 2
            result = args.func(args)
            if inspect.iscoroutine(result):
                result = await result
            return result if isinstance(result, int) else 0
        except VerbExit as exc:
            return exc.code
        except SpecdebugError as exc:  # rendered as on the direct path (cli.run_verb)
            return fail(exc)
        except SystemExit as exc:  # argparse's own errors (usage printed to stderr)
            return exc.code if isinstance(exc.code, int) else 2
        finally:
            heartbeat.cancel()
            _SINK.reset(tokens[0])
            KEPT.reset(tokens[1])

    async def idle_watch(self) -> None:
        while not self.done.is_set():
            await asyncio.sleep(min(5.0, self.idle_s / 4))
            if self.active == 0 and time.monotonic() - self.last > self.idle_s:
                self.done.set()


async def prewarm(agent: Agent, verb_argv: list[str]) -> None:
    """Open the connection the verb that started this agent needed, so the next one finds it warm."""
    from specdebug.verbs.table import verb_parser

    try:
        if verb_argv and verb_argv[0] in AGENT_VERBS:
            args, _ = verb_parser(verb_argv[0]).parse_known_args(verb_argv[1:])
            if getattr(args, "host", None):
                await agent.kept.get(args.host, args)
    except (Exception, SystemExit):
        pass  # the next request connects and reports in the verb's own words


def _identity_difference(mine: dict[str, str], theirs: object) -> str:
    """Why an agent is of other code than its caller, in a few words."""
    if not isinstance(theirs, dict):
        return "a caller of an older specdebug"
    if mine.get("version") != theirs.get("version"):
        return f"it runs specdebug {mine.get('version')}, the caller {theirs.get('version')}"
    if mine.get("python") != theirs.get("python"):
        return f"it runs under {mine.get('python')}, the caller under {theirs.get('python')}"
    return "its code changed since it started"


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


async def serve(sock_path: Path, idle_s: float, warm: list[str] | None = None) -> int:
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
    warming = asyncio.ensure_future(prewarm(agent, warm or []))
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


def _read_warm(stdin: Any) -> list[str]:
    """The verb that started this agent, as JSON [verb, argv...] on stdin (not on the command line,
    which every local user can read); empty when stdin says nothing."""
    try:
        if stdin is None or stdin.isatty():
            return []
        raw = stdin.buffer.readline(MAX_REQUEST) if hasattr(stdin, "buffer") else b""
        warm = json.loads(raw or b"[]")
    except (OSError, ValueError, TypeError):
        return []
    return [str(a) for a in warm] if isinstance(warm, list) else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdebug.agent", description="specdebug's local agent")
    ap.add_argument("--socket", required=True, help="the socket to serve (in the user's private folder)")
    ap.add_argument(
        "--idle", type=float, default=float(os.environ.get("SPECDEBUG_AGENT_IDLE_S", DEFAULT_IDLE_S))
    )
    args = ap.parse_args(argv)
    warm = _read_warm(sys.stdin)
    sys.stdout = _Routed("o", None)
    sys.stderr = _Routed("e", None)
    return asyncio.run(serve(Path(args.socket), args.idle, warm))
