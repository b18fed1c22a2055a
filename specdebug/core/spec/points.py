"""The figures of one recorded benchmark result that the speculation arithmetic needs, each with
the place it came from (a figure nobody measured stays None: "cannot tell", never a guess).

Tokens verified per cycle come from the recorded launch argv, read by the engine whose speculative
flags it holds (engines.*.spec_shape): SGLang's --speculative-num-draft-tokens (else num-steps + 1,
SGLang's own default for topk 1); vLLM's --speculative-config num_speculative_tokens + 1 (the drafts
plus the target's own token).  Times come from the server's
log lines seen during the run (ServerMetrics: verify_ms, extra draft_ms), accept length from the
log, else /metrics, else the external tool's output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specdebug.core.bench.models import BenchResult
from specdebug.core.fingerprint import split_argv
from specdebug.core.report import HistoryEntry
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
    sources: dict[str, str] = field(default_factory=dict)


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
    p.measured_tok_s = res.headline()
    if p.measured_tok_s is not None:
        kind = "decode tok/s (client, per stream)" if res.decode_tok_s == p.measured_tok_s else "output tok/s"
        kind = "gen throughput (the server's; one stream's rate only at batch 1)" if live else kind
        p.sources["measured_tok_s"] = f"{where} {kind}"
    srv = res.server
    if srv is not None and srv.verify_ms is not None:
        p.verify_ms = srv.verify_ms
        p.sources["verify_ms"] = f"{where} server log (mean of verify lines)"
    if srv is not None and srv.extra.get("draft_ms") is not None:
        p.draft_ms = srv.extra["draft_ms"]
        p.sources["draft_ms"] = f"{where} server log (mean of draft lines)"
    if not spec:
        p.accept_len, p.draft_ms = 1.0, 0.0
        p.sources["accept_len"] = "no speculation: one token per step"
    elif srv is not None and srv.accept_len is not None:
        p.accept_len = srv.accept_len
        p.sources["accept_len"] = f"{where} server log (accept len)"
    elif res.server_prom and res.server_prom.rates and res.server_prom.rates.accept_length is not None:
        p.accept_len = res.server_prom.rates.accept_length
        p.sources["accept_len"] = (
            f"{where} /metrics ({res.server_prom.rates.sources.get('accept_length', '')})"
        )
    elif res.accept_length is not None:
        p.accept_len = res.accept_length
        p.sources["accept_len"] = f"{where} benchmark output"
    return p


def latest_per_config(points: list[SpecPoint]) -> list[SpecPoint]:
    """The last result of each config (fingerprint, else profile name), in session order."""
    last: dict[str, SpecPoint] = {}
    for p in points:
        last.pop(p.fingerprint or p.profile, None)
        last[p.fingerprint or p.profile] = p
    return list(last.values())
