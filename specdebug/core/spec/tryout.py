"""`spec --advise --try`: the advised depth, launched, benchmarked and stopped, so the prediction is
checked and not only made (issue 42).

The tried config is the profile with the advised depth applied to its argv (core.spec.advise
.with_depth), under its own name (`<profile>.try-d<k>`) and log file beside the profile's; it goes
through the same core calls `launch` and `bench` use (control.launch, control.watch,
bench.runner.run_benchmark), so its launch, verdict, result and stop are journaled like any other
and the next `--advise` counts its result as a measured config.  The prediction beside the
measurement is a `spec_advice_try` record (core.records.SpecAdviceTryRecord).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import PurePosixPath

from specdebug.core.bench.runner import BenchError, BenchRequest, run_benchmark
from specdebug.core.control import actions as server_control
from specdebug.core.control.events import Verdict
from specdebug.core.control.launch import launch
from specdebug.core.control.watch import watch
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.records import SpecAdviceTryRecord
from specdebug.core.spec.advise import Advice, with_depth
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote, RemoteError

TRY_SUFFIX = ".try-d"
STOP_GRACE_S = 10.0


class NothingToTry(SpecdebugError):
    """The advice names no depth to try (cannot tell which)."""


def tried_profile(profile: Profile, depth: int) -> Profile:
    """The profile at `depth`: its argv with the depth applied, its own name and log file."""
    name = f"{profile.name}{TRY_SUFFIX}{depth}"
    log = str(PurePosixPath(profile.server.log_file).with_name(f"{name}.log"))
    server = profile.server.model_copy(
        update={"argv": with_depth(profile.server.argv, depth), "log_file": log}
    )
    return profile.model_copy(update={"name": name, "server": server})


async def try_advice(
    remote: Remote,
    profile: Profile,
    advice: Advice,
    *,
    journal: EventJournal | None,
    host: str | None,
    request: BenchRequest | None = None,
    say: Callable[[str], None] = lambda _text: None,
) -> SpecAdviceTryRecord:
    """Launch the advised depth, benchmark it, stop it; the prediction beside the measurement."""
    best = advice.best
    if best is None:
        raise NothingToTry(f"nothing to try: {advice.verdict}", hint="measure the depth the advice names")
    cand = tried_profile(profile, best.depth)
    rec = SpecAdviceTryRecord(
        profile=profile.name,
        config=cand.name,
        depth=best.depth,
        flags=best.config,
        fingerprint=cand.fingerprint(),
        predicted_tok_s=best.predicted_tok_s,
        low=best.low,
        high=best.high,
        host=host,
    )
    say(f"trying depth {best.depth} ({best.config}) as {cand.name}")
    record = await launch(remote, cand, journal=journal)
    try:
        verdict: Verdict | None = None
        async for ev in watch(remote, record, cand, journal=journal):
            if isinstance(ev, Verdict):
                verdict = ev
        if verdict is None or verdict.verdict != "ready":
            rec.reason = f"did not start: {verdict.reason if verdict else 'no verdict'}"
        else:
            say(f"{cand.name} ready after {verdict.elapsed_s:.1f}s; benchmarking")
            try:
                res = await run_benchmark(remote, cand, request, journal=journal, host=host)
            except (BenchError, RemoteError) as exc:
                rec.reason = f"benchmark failed: {exc}"
            else:
                _measured(rec, res.headline() if res.usable() else None, res.finished_at)
                if not res.usable():
                    rec.reason = f"benchmark {res.status}: {res.failure_reason or 'no result'}"
    finally:
        with contextlib.suppress(RemoteError, OSError):
            await server_control.stop_record(remote, record, grace_s=STOP_GRACE_S, journal=journal)
            say(f"{cand.name} stopped")
    if journal is not None:
        rec = SpecAdviceTryRecord.model_validate(journal.append(rec, sync=True).model_dump())
    return rec


def _measured(rec: SpecAdviceTryRecord, tok_s: float | None, finished: float | None) -> None:
    rec.measured_tok_s, rec.result_ts = tok_s, finished
    if tok_s and rec.predicted_tok_s is not None:
        rec.error_pct = (rec.predicted_tok_s - tok_s) / tok_s * 100.0
    if tok_s and rec.low is not None and rec.high is not None:
        rec.inside = rec.low <= tok_s <= rec.high
