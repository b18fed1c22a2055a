"""Shared plumbing for headless verbs: host arguments, connecting with the headless host-key
policy, text and JSON output and exit codes (0 ok, 1 the checked thing failed, 2 usage/config error).

Every human-readable line a verb prints goes through `out` or `err`: text from the box (log lines,
cmdlines, environ values, excerpts, journal entries) never drives the terminal (see
specdebug.core.sanitize).  JSON goes through `print_json`, which `json.dumps` keeps exact and strict (no NaN/Infinity).

asyncssh is imported only when a verb connects: local verbs (scan FILE, profile) stay quick.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO, cast, overload

from specdebug.core.sanitize import visible
from specdebug.errors import SpecdebugError
from specdebug.remote.api import RemoteError

# connecting is verbs/connecting.py's; these names are also imported from here
from specdebug.verbs.connecting import DEFAULT_CONNECT_TIMEOUT_S as DEFAULT_CONNECT_TIMEOUT_S
from specdebug.verbs.connecting import KEPT as KEPT
from specdebug.verbs.connecting import connect as connect
from specdebug.verbs.connecting import make_remote as make_remote

if TYPE_CHECKING:
    from specdebug.core.boxjournal import BoxJournal
    from specdebug.core.journal import Journal
    from specdebug.core.profiles import Profile
    from specdebug.core.target import Target
    from specdebug.remote.api import Connection, Remote


class VerbExit(Exception):
    """Raise to end a verb with an exit code (message already printed)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or f"exit {code}")
        self.code = code
        self.message = message


def load_profile_or_exit(path: str, verb: str) -> Profile:
    """The profile at `path`, or one `VERB: file:line: field: problem` line and exit 2 (usage error).

    Every verb that takes -c PROFILE loads it through here, so a bad profile reads the same everywhere,
    and an example's name (`-c baseline`) is accepted everywhere, as `demo -c NAME` accepts it."""
    from specdebug.core.profiles import ProfileError, load_profile
    from specdebug.resources import profile_path

    try:
        return load_profile(profile_path(path))
    except ProfileError as exc:
        fail(exc, verb)
        raise VerbExit(exc.exit_code, str(exc)) from exc
    except OSError as exc:
        err(f"{verb}: {exc}")
        raise VerbExit(2, str(exc)) from exc


def positive_int(text: str) -> int:
    """argparse type for counts (requests, concurrency, lengths, repeats): an int of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_ssh_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-F", "--ssh-config", metavar="FILE", help="ssh config file (default ~/.ssh/config)")
    parser.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="trust and save an unknown host key (a changed key is always refused)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT_S,
        metavar="S",
        help=f"give up connecting after S seconds (default {DEFAULT_CONNECT_TIMEOUT_S:g}); "
        "a refused connection or an unknown host name fails at once",
    )
    parser.add_argument(
        "--no-agent",
        action="store_true",
        help="connect from this process; do not use (or start) the local agent that keeps connections",
    )
    add_state_dir_arg(parser)


def add_state_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        default=None,
        help="folder ON THE BOX for server records (default $SPECDEBUG_STATE_DIR, else ~/.specdebug/servers"
        " in the box user's home)",
    )


def add_host_args(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    add_ssh_args(parser)
    parser.add_argument(
        "host",
        nargs=None if required else "?",
        help="HOST, user@HOST, user@HOST:PORT, an ssh config alias, or slurm:JOBID[:NODE]",
    )


@asynccontextmanager
async def open_remote(
    args: argparse.Namespace, host: str | None = None, *, helper: bool = True
) -> AsyncIterator[Connection]:
    """Connected remote for a verb; failures print one clear line and raise VerbExit."""
    from specdebug.remote.api import HostSpecError

    host = host or args.host
    kept = KEPT.get()
    if kept is not None:
        try:
            remote = await kept(host, args)
        except SpecdebugError as exc:
            raise VerbExit(fail(exc), str(exc)) from exc
        for warning in remote.warnings:
            err(f"warning: {warning}")
        yield remote  # kept open for the next verb
        return
    try:
        remote = make_remote(host, args, helper=helper)
    except HostSpecError as exc:
        raise VerbExit(fail(exc), str(exc)) from exc
    for warning in remote.warnings:
        err(f"warning: {warning}")
    said = len(remote.warnings)
    try:
        timeout = getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
        await connect(remote, host, timeout, getattr(args, "ssh_config", None))
    except RemoteError as exc:
        await remote.close()
        raise VerbExit(fail(exc), str(exc)) from exc
    try:
        yield remote
    finally:
        for warning in remote.warnings[said:]:  # learnt on the box (no helper, output not ours)
            err(f"warning: {warning}")
        await remote.close()


@asynccontextmanager
async def open_target(
    args: argparse.Namespace,
    profile: Profile,
    *,
    partial: bool = False,
    one_node: bool = False,
    helper: bool = True,
    host: str | None = None,
    held: Mapping[str, Remote] | None = None,
) -> AsyncIterator[Target]:
    """The verbs' one way to the server the user named (core.target.open_target with `open_remote`
    as the connector): a one-box profile is one node on HOST, a deployment every node (HOST, if
    given, its leader).  A profile that cannot be placed as asked is one line and exit 2; a node
    that cannot be reached is open_remote's line and exit, except with `partial` (stop, status: the
    other nodes are still acted on).  one_node: HOST names the one node acted on (any node of a
    deployment; none: the leader).  host: the HOST when the verb's arguments name it otherwise
    (grep's HOST:PATH).  held: connections the verb already has (host -> remote: the box journal's),
    used as they are and left open."""
    from contextlib import nullcontext

    from specdebug.core.deployment import DeploymentError
    from specdebug.core.target import open_target as place_and_connect

    def connect(host: str) -> AbstractAsyncContextManager[Remote]:
        if held and host in held:
            return nullcontext(held[host])
        return open_remote(args, host, helper=helper)

    try:
        async with place_and_connect(
            profile,
            host or getattr(args, "host", None),
            connect,
            ssh_config=getattr(args, "ssh_config", None),
            partial=(VerbExit,) if partial else (),
            one_node=one_node,
        ) as target:
            yield target
    except DeploymentError as exc:  # placing it (before any connection), or a node's refusal
        err(str(exc))
        raise VerbExit(2, str(exc)) from exc


def node_profile(args: argparse.Namespace, profile: Profile) -> Profile:
    """The profile as the node on HOST runs it (any node of a deployment; none: its leader), before
    connecting: what a verb that reads its session first (spec) keys its records by.  A HOST that
    is no node of the deployment is one line and exit 2 (open_target's one_node says the same)."""
    from specdebug.core.deployment import DeploymentError, place_one

    try:
        placed = place_one(profile, getattr(args, "host", None), ssh_config=getattr(args, "ssh_config", None))
    except DeploymentError as exc:
        err(str(exc))
        raise VerbExit(2, str(exc)) from exc
    return placed.leader.profile


def box_session(arg: str | None) -> str | None:
    """--session (else $SPECDEBUG_SESSION) `box:NAME` -> NAME, None for a local folder; a bad name: exit 2.

    Checked before connecting, so a typo costs no ssh round trip."""
    session = arg or os.environ.get("SPECDEBUG_SESSION")
    if not session or not session.startswith("box:"):  # core.journal.BOX_PREFIX, without its imports
        return None
    from specdebug.core.boxjournal import BoxJournalError, box_spec

    try:
        return box_spec(session)
    except BoxJournalError as exc:
        err(f"--session {exc}")
        raise VerbExit(2, str(exc)) from exc


@asynccontextmanager
async def session_journal(
    arg: str | None, remote: Remote | None, *, for_writing: bool = True, target: str | None = None
) -> AsyncIterator[Journal | BoxJournal | None]:
    """The one way a verb opens its journal (same meaning of --session as the TUI).

    `box:NAME`: the journal on the box over the verb's own connection (read on open, every event
    flushed to the box before the connection closes); else a local folder (core.journal.resolve_session;
    None for a reader with no session yet), by default the latest of the host acted on (`target`,
    else the remote's name): a session is per target unless --session joins them."""
    from specdebug.core.boxjournal import BoxJournal
    from specdebug.core.journal import Journal, resolve_session

    spec = box_session(arg)
    if spec is None:
        host = target or (remote.name if remote is not None else None)
        session = resolve_session(arg, for_writing=for_writing, target=host)
        yield Journal(session) if session is not None else None
        return
    if remote is None:
        err(f"--session box:{spec} is kept on the box: give the box (--host HOST)")
        raise VerbExit(2)
    journal = BoxJournal(remote, spec)
    await journal.refresh()
    for why in journal.refused:  # a group journal's file the box would not read (a planted link)
        err(f"warning: {why}; its records skipped")
    ok = False
    try:
        yield journal
        ok = True
    finally:
        try:
            await journal.flush()
        except (RemoteError, TimeoutError) as exc:
            err(str(exc) if str(exc) else f"box journal {journal.path}: not all events written: timed out")
            if ok:
                raise VerbExit(1) from exc


def out(text: object = "", *, file: TextIO | None = None, end: str = "\n", newlines: bool = True) -> None:
    """Print text for a human (stdout by default); control characters are shown, never emitted.

    newlines=False for one line that carries box text (a status line, a log line): a newline in
    it is shown as ``\\n`` instead of faking a second line.
    """
    print(visible(str(text), newlines=newlines), end=end, file=file or sys.stdout, flush=True)


def out_block(lines: list[str]) -> None:
    """Write many output lines at once (grep --follow at high rates): each line was already made
    visible (text) or is JSON, so this only joins them; the one bulk path beside `out`."""
    sys.stdout.write("".join(lines))
    sys.stdout.flush()


def progress(text: str) -> None:
    """Redraw one status line on stderr (a terminal): `\r` is ours, the text is made visible."""
    print("\r" + visible(text), end="", file=sys.stderr, flush=True)


def err(message: str) -> None:
    """One `specdebug: ...` line on stderr (messages quote paths, errors and lines from the box)."""
    out(f"specdebug: {message}", file=sys.stderr)


def fail(exc: SpecdebugError, context: str = "") -> int:
    """The command line's one rendering of the error root: `specdebug: [CONTEXT: ]MESSAGE`, then
    `specdebug: hint: HINT` when the error carries one, and the error's exit code; never a traceback.
    Every CLI boundary (cli.run_verb, the run_verb decorator, the local agent) ends here."""
    message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    err(f"{context}: {message}" if context else message)
    if exc.hint:
        err(f"hint: {exc.hint}")
    return exc.exit_code


def finite(obj: Any) -> Any:
    """`obj` with every NaN or infinite float replaced by None: a figure parsed from a log or a page
    can be one (a 400-digit number is inf), and a bare NaN/Infinity is not JSON (strict parsers,
    jq, JavaScript refuse it).  Verbs say why a figure is null where they left it out themselves."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def json_text(obj: Any) -> str:
    """Strict JSON of `obj` (no NaN/Infinity: those become null), pydantic models in JSON mode."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    return json.dumps(finite(obj), default=str, allow_nan=False)


def print_json(obj: Any) -> None:
    """One JSON object on one line, strict (json_text)."""
    print(json_text(obj), flush=True)


SyncVerbFunc = Callable[[argparse.Namespace], int]
AsyncVerbFunc = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


@overload
def run_verb(func: AsyncVerbFunc) -> AsyncVerbFunc: ...
@overload
def run_verb(func: SyncVerbFunc) -> SyncVerbFunc: ...
def run_verb(func: AsyncVerbFunc | SyncVerbFunc) -> AsyncVerbFunc | SyncVerbFunc:
    """Decorator: VerbExit becomes its exit code, and any SpecdebugError (a remote failure, a
    refused launch, a profile error...) its one rendering (`fail`: the line, the hint, its exit
    code; never a traceback), so verbs can bail out from deep inside."""
    import functools
    import inspect

    if inspect.iscoroutinefunction(func):
        async_func = cast(AsyncVerbFunc, func)

        @functools.wraps(async_func)
        async def wrapper(args: argparse.Namespace) -> int:
            try:
                return await async_func(args)
            except VerbExit as exc:
                return exc.code
            except SpecdebugError as exc:
                return fail(exc)

        return wrapper

    sync_func = cast(SyncVerbFunc, func)

    @functools.wraps(sync_func)
    def sync_wrapper(args: argparse.Namespace) -> int:
        try:
            return sync_func(args)
        except VerbExit as exc:
            return exc.code
        except SpecdebugError as exc:
            return fail(exc)

    return sync_wrapper


def say_skipped(journal: Any) -> None:
    """One stderr line per journal record the reader skipped (core.journal.record_problem)."""
    for line in getattr(journal, "skipped", None) or []:
        err(f"warning: {line}")


def interrupted_lines(
    args: argparse.Namespace, profile: Profile, *, pid: int | None, not_recorded: str
) -> list[str]:
    """What a verb stopped by Ctrl+C or SIGTERM leaves behind: the server keeps running (with the exact
    command that stops it), and what was not recorded.  Stopping the server is the user's call: it may
    have taken minutes to start."""
    import shlex

    cmd = ["specdebug", "stop"] + (["-F", args.ssh_config] if getattr(args, "ssh_config", None) else [])
    cmd += ([args.host] if args.host else []) + ["-c", args.profile or profile.name]
    where = ", ".join(x for x in (f"PID {pid}" if pid else "", f"port {profile.server.port}") if x)
    on = args.host or "its nodes"  # a deployment's verb may leave HOST out
    return [
        f"interrupted: {profile.name} keeps running on {on} ({where}); stop it with: {shlex.join(cmd)}",
        f"not recorded: {not_recorded}",
    ]
