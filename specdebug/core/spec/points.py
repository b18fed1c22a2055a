"""The figures of one recorded benchmark result that the speculation arithmetic needs, each with
the place it came from (a figure nobody measured stays None: "cannot tell", never a guess).

Tokens verified per cycle come from the recorded launch argv, read by the engine whose speculative
flags it holds (engines.*.spec_shape): SGLang's --speculative-num-draft-tokens (else num-steps + 1,
SGLang's own default for topk 1); vLLM's --speculative-config num_speculative_tokens + 1 (the drafts
plus the target's own token).  Times come from the server's
log lines seen during the run (ServerMetrics: verify_ms, extra draft_ms), accept length from the
log, else /metrics, else the external tool's output, else the stream's tokens per burst.

Where the engine logs no verify time (vLLM), the cycle comes from the stream instead: the built-in
client's gaps between token bursts (core.bench.bursts), recomputed here with the tokens one cycle
can yield, so bursts of merged steps drop out.  Every figure passes its sane range (core.spec.bounds)
or is left out with a note.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specdebug.core.bench import cpuwait
from specdebug.core.bench.bursts import recompute
from specdebug.core.bench.models import BenchResult, ServerMetrics, StreamCycles
from specdebug.core.fingerprint import split_argv
from specdebug.core.report import HistoryEntry
from specdebug.core.spec.bounds import bounded
from specdebug.engines import ENGINES
from specdebug.engines.base import SpecShape


@dataclass
class SpecPoint:
    """One result's speculative figures; `sources` names where each came from."""

    id: int
    profile: str
    fingerprint: str | None
    speculative: bool
    draft_tokens: int | None = None
    topk: int | None = None
    draft_ms: float | None = None
    verify_ms: float | None = None
    accept_len: float | None = None
    measured_tok_s: float | None = None
    single_stream: bool = True
    stream_cycle_ms: float | None = None  # median gap between token bursts (one cycle per burst)
    stream: dict[str, Any] | None = None  # the stream's cycle distribution (StreamCycles, no samples)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # figures left out (outside their sane range)
    cpu_wait: float | None = None  # the run's worst CPU contention, box or client (core.bench.cpuwait)


def _flags(argv: list[str] | None) -> dict[str, list[str]]:
    return dict(split_argv(list(argv or []))[1])


def spec_shape(argv: list[str] | None) -> SpecShape:
    """(speculative?, tokens verified per cycle, topk, which flags said so) from a launch argv: the
    engine whose speculative switch the argv holds answers (an argv holds one engine's flags)."""
    flags = _flags(argv)
    for engine in ENGINES.values():
        shape = engine.spec_shape(flags)
        if shape is not None:
            return shape
    return False, 1, None, "no " + " or ".join(e.spec_switch for e in ENGINES.values())


def point_of(entry: HistoryEntry) -> SpecPoint:
    """The speculative figures of one history entry."""
    res: BenchResult = entry.result
    spec, tokens, topk, why = spec_shape(res.argv)
    p = SpecPoint(
        id=entry.id,
        profile=res.profile or "?",
        fingerprint=res.fingerprint,
        speculative=spec,
        draft_tokens=tokens,
        topk=topk,
        single_stream=res.config.concurrency in (None, 1),
    )
    live = entry.id == 0  # core.spec.live: the running server's log now, no benchmark
    where = "the server log now" if live else f"result #{entry.id}"
    p.sources["draft_tokens"] = f"{where if not live else 'the profile'} argv: {why}"
    p.measured_tok_s = bounded("measured_tok_s", res.headline(), where, p.notes)
    if p.measured_tok_s is not None:
        kind = "decode tok/s (client, per stream)" if res.decode_tok_s == p.measured_tok_s else "output tok/s"
        kind = "gen throughput (the server's; one stream's rate only at batch 1)" if live else kind
        p.sources["measured_tok_s"] = f"{where} {kind}"
    srv = res.server
    log = where if live else f"{where} server log"
    if srv is not None:
        p.verify_ms = bounded("verify_ms", srv.verify_ms, f"{log} (verify lines)", p.notes)
        p.draft_ms = bounded("draft_ms", srv.extra.get("draft_ms"), f"{log} (draft lines)", p.notes)
    if p.verify_ms is not None:
        p.sources["verify_ms"] = f"{log} (mean of verify lines)"
    if p.draft_ms is not None:
        p.sources["draft_ms"] = f"{log} (mean of draft lines)"
    _stream(p, res, where)
    _contention(p, res, where)
    if not spec:
        p.accept_len, p.draft_ms = 1.0, 0.0
        p.sources["accept_len"] = "no speculation: one token per step"
    else:
        _accept_len(p, res, where)
    return p


def _contention(p: SpecPoint, res: BenchResult, where: str) -> None:
    """A run on a contended CPU: its client-timed figures (tok/s, the stream's cycle) may be off."""
    sides = {"box": res.box_cpu_wait, "client": res.client_cpu_wait}
    known = {k: v for k, v in sides.items() if v is not None}
    if not known:
        return
    p.cpu_wait = max(known.values())
    if p.cpu_wait >= cpuwait.CONTENDED:
        said = ", ".join(f"{k} {v:.0%}" for k, v in known.items())
        p.notes.append(
            f"{where} ran on a contended CPU (some task waited for a CPU: {said} of the run, Linux CPU"
            " pressure): its tok/s and stream cycle may be off"
        )


def contended(points: Iterable[SpecPoint]) -> list[str]:
    """`#id profile` of each point whose run was measured on a contended CPU (core.bench.cpuwait)."""
    return [f"#{q.id} {q.profile}" for q in points if (q.cpu_wait or 0.0) >= cpuwait.CONTENDED]


def _accept_len(p: SpecPoint, res: BenchResult, where: str) -> None:
    """Accept length from the log, else /metrics, else the benchmark's output, else the stream."""
    srv, prom = res.server, res.server_prom
    rates = prom.rates if prom is not None else None
    stream = p.stream or {}
    candidates = [
        (srv.accept_len if srv else None, f"{where} {_server_source(srv, 'accept_len')}"),
        (
            rates.accept_length if rates else None,
            f"{where} /metrics ({rates.sources.get('accept_length', '') if rates else ''})",
        ),
        (res.accept_length, f"{where} benchmark output"),
        (stream.get("mean_tokens_per_burst"), f"{where} stream bursts (mean tokens per burst)"),
    ]
    for value, source in candidates:
        p.accept_len = bounded("accept_len", value, source, p.notes)
        if p.accept_len is not None:
            p.sources["accept_len"] = source
            return


def _server_source(srv: ServerMetrics | None, name: str) -> str:
    """Where the bench's server figure came from: its log, unless the bench filled it from /metrics."""
    via = srv.sources.get(name) if srv is not None else None
    return (
        f"server {via} ({name}, the bench's server figures)"
        if via
        else f"server log ({name.replace('_', ' ')})"
    )


def _stream(p: SpecPoint, res: BenchResult, where: str) -> None:
    """The stream's cycle distribution, recomputed with the tokens one cycle can yield (drafts + 1)."""
    sc: StreamCycles | None = res.stream_cycles
    if sc is None:
        return
    interval = _flags(res.argv).get("--stream-interval")
    if interval and interval[0] not in ("1", ""):
        p.notes.append(
            f"--stream-interval {interval[0]}: the server holds tokens back, its bursts are not cycles"
        )
        return
    sc = recompute(sc, p.draft_tokens if p.speculative else 1)
    p.stream = sc.model_dump(mode="json", exclude={"samples"})
    p.stream_cycle_ms = bounded("stream_cycle_ms", sc.median_ms, f"{where} stream bursts", p.notes)
    if sc.median_ms is None:  # why the stream gives no cycle (merged steps, too few gaps), in the answer
        p.notes.extend(f"{where} stream: {note}" for note in sc.notes)
    if p.stream_cycle_ms is not None:
        p.sources["stream_cycle_ms"] = f"{where} {sc.describe()}"


def latest_per_config(points: list[SpecPoint]) -> list[SpecPoint]:
    """The last result of each config (fingerprint, else profile name), in session order."""
    last: dict[str, SpecPoint] = {}
    for p in points:
        last.pop(p.fingerprint or p.profile, None)
        last[p.fingerprint or p.profile] = p
    return list(last.values())
