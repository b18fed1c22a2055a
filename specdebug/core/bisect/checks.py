"""Checks around the search: is another server of the session running (refuse), did the box drift.

The drift check is the good end measured again late in the run; `drift_of` compares it with the
good end's first readings against the measured noise and says what the GPUs report now.
"""

from __future__ import annotations

import statistics

from specdebug.core.bisect.book import Book
from specdebug.core.bisect.judge import Judge
from specdebug.core.bisect.models import Drift
from specdebug.core.bisect.trial import Nodes
from specdebug.core.control.records import group_members, load_record
from specdebug.remote.api import Remote


async def busy_server(remote: Remote, names: list[str], nodes: Nodes | None = None) -> str | None:
    """The first of these recorded servers still running, described (None: none is); a
    deployment's (`nodes`): on any node, by that node's record of it."""
    if not names:
        return None
    where = [(remote, names, "")]
    if nodes is not None:
        where = [
            (r, nodes.record_names(names, rank), f" on {host}")
            for rank, (host, r) in enumerate(nodes.remotes.items())
        ]
    for box, records, on in where:
        procs = await box.processes()
        for name in records:
            record = await load_record(box, name)
            if record is not None and record.stopped_at is None and group_members(procs, record):
                return f"{name}{on} (pid {record.pid}, port {record.port})"
    return None


def drift_of(book: Book, judge: Judge, good_fp: str) -> tuple[Drift | None, str | None]:
    """(the drift evidence, a warning when it is beyond the noise) from the good end's readings."""
    after = book.values(good_fp, drift=True)[-1:]
    before = book.values(good_fp)
    if not after or not before:
        return None, None
    last = book.measurements(good_fp, drift=True)[-1]
    drift = Drift(
        before=statistics.fmean(before),
        after=after[0],
        beyond_noise=judge.drifted(before, after),
        gpu_before=book.measurements(good_fp)[0].gpu_before,
        gpu_after=last.gpu_after,
    )
    if not drift.beyond_noise:
        return drift, None
    throttled = sorted({r for g in last.gpu_after for r in g.get("throttle_reasons") or []})
    return drift, (
        f"drift: the good end measured {drift.before:.2f} at the start and {drift.after:.2f} now, beyond the "
        f"noise; GPU throttle reasons now: {', '.join(throttled) or 'none'}"
    )
