"""The speculation arithmetic's figures read from the running server's log now, for a profile that
has no benchmark result in the session: the tail of the log through the same parser a benchmark
uses (core.bench.serverlog), wrapped as a result so the arithmetic treats it like any other.

Measured tok/s is then the server's own gen throughput (its decode log lines), which is one
stream's rate only while one request runs: the point says so in its source.
"""

from __future__ import annotations

import time

from specdebug.core.bench.models import BenchConfig, BenchResult
from specdebug.core.bench.serverlog import server_metrics
from specdebug.core.control.records import file_size
from specdebug.core.profiles import Profile
from specdebug.core.report import HistoryEntry
from specdebug.remote.api import Remote, RemoteError

TAIL_BYTES = 512 << 10
LIVE_ID = 0  # never a history id (those start at 1)


async def live_entry(remote: Remote, profile: Profile) -> HistoryEntry | None:
    """The profile's figures from the last TAIL_BYTES of its log (None: no log or no figures)."""
    path = profile.server.log_file
    size = await file_size(remote, path)
    if not size:
        return None
    try:
        data = await remote.read_file(path, offset=max(0, size - TAIL_BYTES), max_bytes=TAIL_BYTES)
    except RemoteError:
        return None
    metrics, _ = server_metrics(data, profile.patterns, profile.server.kind)
    if metrics.samples == 0:
        return None
    res = BenchResult(
        kind="parsed",
        label=f"server log now (last {len(data) // 1024} KiB of {path})",
        profile=profile.name,
        fingerprint=profile.fingerprint(),
        argv=list(profile.server.argv),
        env=dict(profile.server.env),
        config=BenchConfig(concurrency=1),
        decode_tok_s=metrics.gen_throughput,
        server=metrics,
        started_at=time.time(),
    )
    return HistoryEntry(id=LIVE_ID, ts=time.time(), result=res)
