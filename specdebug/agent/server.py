"""The agent process: a Unix-socket server that runs verbs on kept connections.

One request per socket connection: `{"v", "verb", "argv", "env"}` in, then `{"o": text}` / `{"e": text}`
lines (the verb's stdout and stderr, in order) and one `{"rc": code}`.  The verb runs through the same
parser and function as on the direct path; only `open_remote` differs (verbs.common.KEPT: a connection
kept per host and settings, with its resident helper).  A peer of another uid is refused, and so is a
request of another protocol or environment (the client then runs the verb itself).  The agent ends
after `idle_s` with no request, closing its connections and removing its socket.
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

from specdebug.agent.client import AGENT_VERBS, PROTOCOL
from specdebug.agent.paths import env_fingerprint, is_private, pid_path
from specdebug.agent.pool import KeptConnections

DEFAULT_IDLE_S = 600.0
MAX_REQUEST = 1 << 20

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
            if not self._acceptable(request):
                writer.write(b'{"refused": true}\n')
                return
            rc = await self._run(request["verb"], request["argv"], writer)
            writer.write(json.dumps({"rc": rc}).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.active -= 1
            self.last = time.monotonic()
            writer.close()

    def _control(self, what: str) -> dict[str, Any]:
        if what == "stop":
            self.done.set()
        return {
            "pid": os.getpid(),
            "socket": str(self.sock_path),
            "hosts": self.kept.hosts(),
            "idle_s": round(time.monotonic() - self.last, 1),
            "idle_limit_s": self.idle_s,
            "stopping": self.done.is_set(),
        }

    def _acceptable(self, request: Any) -> bool:
        return (
            isinstance(request, dict)
            and request.get("v") == PROTOCOL
            and request.get("env") == self.fingerprint
            and request.get("verb") in AGENT_VERBS
            and isinstance(request.get("argv"), list)
            and all(isinstance(a, str) for a in request["argv"])
        )

    async def _run(self, verb: str, argv: list[str], writer: asyncio.StreamWriter) -> int:
        from specdebug.errors import SpecdebugError
        from specdebug.verbs.common import KEPT, VerbExit, fail
        from specdebug.verbs.table import verb_parser

        def sink(kind: str, text: str) -> None:
            writer.write(json.dumps({kind: text}).encode() + b"\n")

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


async def serve(sock_path: Path, idle_s: float, warm: list[str] | None = None) -> int:
    """Run until idle; 0 also when another agent already serves this socket."""
    if not is_private(sock_path.parent):
        return 2
    lock = open(pid_path(sock_path), "a+")  # noqa: SIM115 - held for the agent's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdebug.agent", description="specdebug's local agent")
    ap.add_argument("--socket", required=True, help="the socket to serve (in the user's private folder)")
    ap.add_argument(
        "--idle", type=float, default=float(os.environ.get("SPECDEBUG_AGENT_IDLE_S", DEFAULT_IDLE_S))
    )
    ap.add_argument("--warm", default="[]", help="JSON [verb, argv...] of the verb that started the agent")
    args = ap.parse_args(argv)
    try:
        warm = [str(a) for a in json.loads(args.warm)]
    except (ValueError, TypeError):
        warm = []
    sys.stdout = _Routed("o", None)
    sys.stderr = _Routed("e", None)
    return asyncio.run(serve(Path(args.socket), args.idle, warm))
