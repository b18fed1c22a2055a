"""The server's state a benchmark run starts from: its health, the version it reports, and whether
the current run printed its ready line (core.bench.runner records them beside the result, and a
server still warming up is a warning).  Every HTTP read has a whole-request deadline and a byte cap
(core.httpread): a server that streams its /version forever costs VERSION_DEADLINE_S only.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from specdebug.core.control.records import this_run_offset
from specdebug.core.httpread import SMALL_BODY, get_bounded
from specdebug.core.model import Model
from specdebug.engines import ENGINES, engine_of
from specdebug.remote.api import Remote, RemoteError

# HTTP paths that answer {"version": ...}: every engine's, tried in turn (the kind may be custom)
VERSION_PATHS = tuple(path for engine in ENGINES.values() for path in engine.version_paths)


class ServerState(Model):
    health_status: int | None = None  # None: no answer at all
    health_error: str | None = None
    version: str | None = None
    version_note: str | None = None  # why no version was read, where a probe was cut
    ready_line: bool | None = None  # None: not checked (custom kind, or no log)


HEALTH_DEADLINE_S = 10.0  # the whole health answer
VERSION_DEADLINE_S = 10.0  # every version path together


async def server_state(client: httpx.AsyncClient, health_path: str) -> ServerState:
    """Health status and server version through the forward (both optional), each read with a
    whole-request deadline and a byte cap (core.httpread): a server that streams its /version
    forever costs VERSION_DEADLINE_S, never the benchmark."""
    st = ServerState()
    try:
        got = await get_bounded(client, health_path, deadline_s=HEALTH_DEADLINE_S, read_body=False)
        st.health_status = got.status
    except httpx.HTTPError as exc:
        st.health_error = f"{type(exc).__name__}: {exc}"
        return st
    try:
        async with asyncio.timeout(VERSION_DEADLINE_S):
            for path in VERSION_PATHS:
                st.version, note = await _version_at(client, path)
                st.version_note = note or st.version_note
                if st.version is not None:
                    break
    except TimeoutError:
        st.version_note = f"the version paths gave no whole answer within {VERSION_DEADLINE_S:g} s"
    if st.version is not None:
        st.version_note = None
    return st


async def _version_at(client: httpx.AsyncClient, path: str) -> tuple[str | None, str | None]:
    """(the version a path answers, or None with why when the answer was cut)."""
    try:
        got = await get_bounded(client, path, deadline_s=VERSION_DEADLINE_S)
    except httpx.HTTPError:
        return None, None
    if got.cut:
        return None, f"{path} answered more than {SMALL_BODY} bytes (not read)"
    if got.status != 200:
        return None, None
    try:
        data = json.loads(got.body)
    except ValueError:
        return None, None
    version = data.get("version") if isinstance(data, dict) else None
    return (version[:200], None) if isinstance(version, str) else (None, None)


async def has_ready_line(
    remote: Remote, path: str, kind: str, profile_name: str | None = None
) -> bool | None:
    """Did the *current* run print its ready line?  Launch appends to the log, so the search starts
    at the run's offset from the launch record (an earlier run's ready line proves nothing)."""
    engine = engine_of(kind)
    line = engine.ready_line if engine is not None else None
    if not line or not path:
        return None
    offset = await this_run_offset(remote, profile_name, path) if profile_name else 0
    script = 'tail -c +"$1" -- "$2" | grep -m 1 -c -F -- "$3"'
    try:
        res = await remote.run(["sh", "-c", script, "sh", str(offset + 1), path, line], timeout=30)
    except RemoteError:
        return None
    if res.exit_status not in (0, 1):
        return None
    return res.exit_status == 0
