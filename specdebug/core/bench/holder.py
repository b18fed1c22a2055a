"""Before a benchmark: is the listener on the profile's port the server we mean to measure?

On a shared box anyone can listen on a free port (the profile's server stopped, or never started):
without this check a benchmark measures, and journals as ours, whoever holds the port.  The
holder must be in the recorded server's process group (the launch or attach record); without a
record, a process of this login is taken, and said so.  Another user's listener, or one of ours
outside the recorded group, stops the benchmark with a sentence saying whose it is.
"""

from __future__ import annotations

from typing import NamedTuple

from specdebug.core.control.records import ServerRecord, find_port_holder, group_members, load_record
from specdebug.core.control.workers import group_filter
from specdebug.core.profiles import Profile
from specdebug.errors import SpecdebugError
from specdebug.remote.api import ConnectionDropped, NotConnected, Remote, RemoteError


class NotOurServer(SpecdebugError):
    """The port is held by something other than the profile's recorded server (the message says whose)."""


class Holder(NamedTuple):
    """What the check found: a warning (None: nothing to say) and the recorded server it proved
    holds the port (None: not proven), whose source the result then names."""

    note: str | None
    server: ServerRecord | None = None


async def check_port_holder(remote: Remote, profile: Profile) -> Holder:
    """No note when the port's listener is the recorded server; a warning when it cannot be told (a
    box without the check, or a listener of ours with no record); NotOurServer otherwise."""
    port = profile.server.port
    try:
        holder = await find_port_holder(remote, port)
    except (ConnectionDropped, NotConnected):
        raise
    except RemoteError as exc:
        return Holder(f"cannot tell who listens on port {port} ({exc}): measured whoever answers")
    if not holder.listening:
        return Holder(None)  # nobody: the benchmark fails on its own ("not reachable")
    if holder.others() and holder.self_uid is not None:
        raise NotOurServer(f"not benchmarking: {holder.describe()}, not {profile.name}'s server")
    record = await load_record(remote, profile.name)
    if record is None or record.stopped_at is not None:
        if not holder.pids:
            return Holder(f"cannot tell who listens on port {port}: {holder.describe()}")
        return Holder(
            f"no launch record for {profile.name}: measured PID {holder.pid} ({' '.join(holder.cmdline)[:80]}), "
            "a process of this login on the port"
        )
    members = group_members(await remote.processes(**group_filter(record.pgid, record.pid)), record)
    if set(holder.pids) & {p.pid for p in members}:
        return Holder(None, record)
    raise NotOurServer(
        f"not benchmarking: {holder.describe()}, not {profile.name}'s recorded server "
        f"(PGID {record.pgid}{', no longer running' if not members else ''})"
    )
