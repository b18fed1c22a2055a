"""What a read-only seat does instead of attaching: find the server the driver launched, write nothing.

`startup.attach` adopts a server and writes its record on the box, which a read-only seat may not
do.  But a server launched by specdebug already has its record there (`~/.specdebug/servers/`,
written by the driver's launch), so an observer reads it and watches the same process group, the
same log from the same offset, and the same health endpoint, without a single write.
"""

from __future__ import annotations

from specdebug.core.control.actions import LaunchRefused
from specdebug.core.control.records import ServerRecord, group_members, load_record
from specdebug.core.control.workers import group_filter
from specdebug.core.profiles import Profile
from specdebug.remote.api import Remote


async def observe(remote: Remote, profile: Profile) -> ServerRecord:
    """The running server's record as the driver's launch wrote it (read only)."""
    record = await load_record(remote, profile.name)
    if record is None or record.stopped_at is not None:
        raise LaunchRefused(
            f"{profile.name}: no server launched by specdebug runs on this box; "
            "a read-only seat observes, it cannot adopt a server started by hand"
        )
    if not group_members(await remote.processes(**group_filter(record.pgid, record.pid)), record):
        raise LaunchRefused(f"{profile.name}: its process group {record.pgid} is gone (exited or stopped)")
    return record
