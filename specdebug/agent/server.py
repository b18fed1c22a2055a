"""The agent process: a Unix-socket server that runs verbs on kept connections.

One request per socket connection: `{"v", "verb", "argv", "cwd", "tty", "env", "identity"}` in, then
at once `{"accepted": pid}`, `{"direct": why}` (the request needs the caller's process: a local file,
--follow, --watch; no note) or `{"refused": true, "why", "replace"}`, then `{"o": text}` / `{"e": text}`
lines (the verb's stdout and stderr, in order), `{"alive": 1}` every ALIVE_S while the verb runs, and
one `{"rc": code}` (or, before any output, a refusal: the agent found its code changed).

The caller's identity (version, package folder, interpreter) is compared at once; the stamp of the
source files (agent.paths.code_stamp, 10-30 ms) is taken beside the verb, whose output is held until it
agrees, so the caller pays no file scan of its own.  The verb runs through the same parser and function as on the direct path; only
`open_remote` differs (verbs.connecting.KEPT: a connection kept per login, with its resident helper).

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
import gc
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
from typing import TYPE_CHECKING, Any

from specdebug.agent.client import AGENT_VERBS, ALIVE_S, PROTOCOL
from specdebug.agent.paths import (
    caller_env,
    code_identity,
    code_stamp,
    env_differences,
    env_fingerprint,
)
from specdebug.agent.pool import KeptConnections

if TYPE_CHECKING:
    from specdebug.remote.api import Connection

DEFAULT_IDLE_S = 600.0
MAX_REQUEST = 1 << 20
CALLER_WAIT_S = 10.0  # a caller must send its request, and read replies, within this

_SINK: contextvars.ContextVar[Callable[[str, str], None] | None] = contextvars.ContextVar(
    "sink", default=None
)
# whether the caller's stdout / stderr is a terminal (a verb shows progress lines only on one)
_TTY: contextvars.ContextVar[tuple[bool, bool]] = contextvars.ContextVar("tty", default=(False, False))


class _Output:
    """One request's stdout/stderr lines to its caller: sent as printed until a kept connection is
    taken, then held until that connection's host-key check (`checks`) says it may answer."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.checks: list[asyncio.Future[bool]] = []
        self.held: list[tuple[str, str]] = []
        self.streamed = False

    def write(self, kind: str, text: str) -> None:
        if self.checks:
            self.held.append((kind, text))
            return
        self.streamed = True
        self.writer.write(json.dumps({kind: text}).encode() + b"\n")

    async def confirmed(self) -> bool:
        """Whether every kept connection the verb used still has its verified host key (each check
        is bounded: pool.HOST_KEY_CHECK_S)."""
        if not self.checks:
            return True
        # a check that failed in any way (cancelled by a drop, an error) is a no: the output is
        # dropped and the verb runs afresh, never a request ended without an answer
        answers = await asyncio.gather(*self.checks, return_exceptions=True)
        return all(answer is True for answer in answers)

    def drop(self) -> None:
        """Forget what is held: it came from a connection that may not answer."""
        self.held, self.checks = [], []

    def release(self) -> None:
        held, self.held, self.checks = self.held, [], []
        for kind, text in held:
            self.write(kind, text)


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
        return _TTY.get()[0 if self.kind == "o" else 1]


async def _send(writer: asyncio.StreamWriter, reply: dict[str, Any]) -> None:
    """One reply line, flushed within CALLER_WAIT_S (a caller that stopped reading is let go)."""
    writer.write(json.dumps(reply).encode() + b"\n")
    await asyncio.wait_for(writer.drain(), CALLER_WAIT_S)


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
            try:  # a caller that connects and says nothing (stopped) does not keep the agent alive
                request = json.loads(await asyncio.wait_for(reader.readline(), CALLER_WAIT_S))
            except (ValueError, asyncio.LimitOverrunError, TimeoutError):
                return
            if isinstance(request, dict) and request.get("control") in ("status", "stop"):
                await _send(writer, self._control(request["control"]))
                return
            refusal = self._refusal(request)
            if refusal is not None:
                await _send(writer, {"refused": True, **refusal})
                return
            direct = _needs_caller(request["verb"], request["argv"], str(request.get("cwd") or "/"))
            if direct is not None:
                await _send(writer, {"direct": direct})
                return
            writer.write(json.dumps({"accepted": os.getpid()}).encode() + b"\n")
            self.served += 1
            tty = request.get("tty")
            _TTY.set(
                (bool(tty[0]), bool(tty[1])) if isinstance(tty, list) and len(tty) == 2 else (False, False)
            )
            rc = await self._run(request["verb"], request["argv"], writer)
            if rc is None:  # its code changed since it started: the caller replaces it
                why = "its code changed since it started"
                await _send(
                    writer, {"refused": True, "why": why, "replace": True, "stopping": self._retire(why)}
                )
                return
            await _send(writer, {"rc": rc})
        except (ConnectionError, OSError, TimeoutError):
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
        if not isinstance(theirs, dict) or {**theirs, "code": self.identity.get("code")} != self.identity:
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

    async def _run(self, verb: str, argv: list[str], writer: asyncio.StreamWriter) -> int | None:
        """Run the verb; what it prints is held until the stamp of the agent's source files agrees
        with the one it started with, and what it prints after taking a kept connection until that
        connection's host key is confirmed (both checks run beside the verb, so they cost no wall time
        of their own when the verb takes as long).  A changed key: the output is dropped and the verb
        runs again, connecting afresh, which refuses the key in the direct path's words.  Changed
        code: None, nothing shown (the caller runs the verb itself and replaces this agent)."""
        loop = asyncio.get_running_loop()
        package, started_as = self.identity.get("package", ""), self.identity.get("code")
        code_same = loop.run_in_executor(None, lambda: code_stamp(package) == started_as)

        async def beat() -> None:  # the caller takes a quiet agent for a stuck one
            while True:
                await asyncio.sleep(ALIVE_S)
                writer.write(b'{"alive": 1}\n')

        heartbeat = asyncio.ensure_future(beat())
        try:
            out = _Output(writer)
            out.checks.append(asyncio.ensure_future(_true_or_none(code_same)))
            rc = await self._guarded(verb, argv, out)
            if not await code_same:
                return None
            if await out.confirmed():
                out.release()
                return rc
            if not out.streamed:  # nothing shown yet: the login whose key changed connects afresh
                out = _Output(writer)
                rc = await self._guarded(verb, argv, out)
                if await out.confirmed():
                    out.release()
                    return rc
            out.drop()
            out.write(
                "e", "specdebug: a host's key changed while the agent ran the verb; its answer is dropped\n"
            )
            return 1
        finally:
            heartbeat.cancel()

    async def _guarded(self, verb: str, argv: list[str], out: _Output) -> int:
        """An attempt.  What it raises while a kept connection it used may not answer is that
        connection's doing, not the verb's (dropped under it: asyncssh asserted on the closed link
        and the request ended without an answer, under load): 1, and the output is dropped by the
        check.  Raised on a connection that may answer, it is the verb's (the caller runs it itself)."""
        try:
            return await self._attempt(verb, argv, out)
        except Exception:
            if not out.checks or await out.confirmed():
                raise
            return 1

    async def _attempt(self, verb: str, argv: list[str], out: _Output) -> int:
        from specdebug.errors import SpecdebugError
        from specdebug.verbs.common import VerbExit, fail
        from specdebug.verbs.connecting import KEPT

        async def kept(host: str, args: argparse.Namespace) -> Connection:
            remote, check = await self.kept.get(host, args)
            if check is not None:
                out.checks.append(check)
            return remote

        tokens = (_SINK.set(out.write), KEPT.set(kept))
        try:
            args, extras = _parser(verb).parse_known_args(argv)
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
            if gc.get_freeze_count():  # grep freezes what import left (a one-shot process); here it
                gc.unfreeze()  # would keep every request's garbage for the agent's life

    async def idle_watch(self) -> None:
        while not self.done.is_set():
            await asyncio.sleep(min(5.0, self.idle_s / 4))
            if self.active == 0 and time.monotonic() - self.last > self.idle_s:
                self.done.set()


_PARSERS: dict[str, argparse.ArgumentParser] = {}


def _parser(verb: str) -> argparse.ArgumentParser:
    """The verb's parser, made once per agent (its code cannot change under it: it retires then):
    argparse looks its translations up on disk (gettext) for every option it adds, which was half of
    the agent's time per warm request (py-spy)."""
    parser = _PARSERS.get(verb)
    if parser is None:
        from specdebug.verbs.table import verb_parser

        parser = _PARSERS[verb] = verb_parser(verb)
    return parser


async def _true_or_none(check: asyncio.Future[bool]) -> bool:
    """The code check as the output's hold sees it: False only means 'do not show' (handled apart)."""
    return bool(await check)


def _needs_caller(verb: str, argv: list[str], cwd: str) -> str | None:
    """Why the request must run in the caller's process (None: the agent runs it): what follows or
    watches streams until the user stops it; a local file or a saved record is the caller's."""
    try:
        args, _ = _parser(verb).parse_known_args(argv)
    except (Exception, SystemExit):
        return None  # a usage error: the agent says it in the verb's words
    if verb == "grep":
        if args.follow:
            return "grep --follow streams until stopped"
        log = args.log
        if log is not None:
            from specdebug.core.logs.location import split_host_path

            host, _ = split_host_path(log)
            names_a_host = args.profile and "/" not in log and not os.path.exists(os.path.join(cwd, log))
            if host is None and not names_a_host:
                return "grep of a local file"
    if verb == "metrics" and args.watch:
        return "metrics --watch streams until stopped"
    if verb == "stacks" and (args.record or args.save or args.compare):
        return "stacks --record/--save/--compare"
    return None


def _identity_difference(mine: dict[str, str], theirs: object) -> str:
    """Why an agent is of other code than its caller, in a few words."""
    if not isinstance(theirs, dict):
        return "a caller of an older specdebug"
    if mine.get("version") != theirs.get("version"):
        return f"it runs specdebug {mine.get('version')}, the caller {theirs.get('version')}"
    if mine.get("python") != theirs.get("python"):
        return f"it runs under {mine.get('python')}, the caller under {theirs.get('python')}"
    return "its code changed since it started"
