"""One session's configs through the speculation arithmetic: for each config the cycle cost, the
tok/s it predicts beside the measured one, the break-even accept length against the baseline, and
its verify time against the fit over the other configs; a verify above the fit comes with the
likely causes and the evidence for each (or says that the recorded data shows none).

The baseline's plain decode step enters the fit as the 1-token point (a decode step is a target
forward over one token); the output says so wherever it was used.

The cycle is draft + verify from the log where the engine logs them (SGLang's `Target verify`
lines); elsewhere (vLLM logs no verify time) it is the stream's median gap between token bursts
(`cycle_source` says which).  Without a verify time the fit is over whole cycles instead: the other
configs' stream cycles against their tokens, the baseline step again as the 1-token point (both
include the same per-step overhead as measured by the client).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from specdebug.core.drift.compare import drift_lines, usable
from specdebug.core.fingerprint import split_argv
from specdebug.core.report import HistoryEntry
from specdebug.core.spec import arith
from specdebug.core.spec.points import SpecPoint, contended, latest_per_config, point_of

NCCL_PREFIX = "NCCL_"


@dataclass
class Cause:
    cause: str
    evidence: list[str]


@dataclass
class ConfigMath:
    """The arithmetic of one config (None where its inputs were not measured)."""

    point: SpecPoint
    cycle_ms: float | None = None
    cycle_source: str | None = None  # "log" (draft + verify lines), "stream" (bursts), "baseline step"
    predicted_tok_s: float | None = None
    prediction_error_pct: float | None = None  # (predicted - measured) / measured
    break_even_accept_len: float | None = None
    fit_verify_ms: float | None = None
    fit_from: list[str] = field(default_factory=list)
    verify_excess_pct: float | None = None
    verify_flagged: bool = False
    fit_of: str | None = None  # "verify" (log verify times) or "cycle" (stream cycles, no verify logged)
    fit_cycle_ms: float | None = None
    cycle_excess_pct: float | None = None
    cycle_flagged: bool = False
    causes: list[Cause] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self.point)
        d.update({k: v for k, v in asdict(self).items() if k != "point"})
        return d


@dataclass
class Baseline:
    id: int
    profile: str
    step_ms: float
    tok_s: float
    source: str


def _baseline(points: list[SpecPoint], base_entry: HistoryEntry | None) -> Baseline | None:
    plain = [p for p in points if not p.speculative and p.single_stream and p.measured_tok_s]
    chosen = next((p for p in plain if base_entry and p.id == base_entry.id), plain[-1] if plain else None)
    if chosen is None or chosen.measured_tok_s is None:
        return None
    step = arith.step_ms_of(chosen.measured_tok_s)
    if step is None:
        return None
    src = f"result #{chosen.id} {chosen.profile}: 1000 / {chosen.measured_tok_s:.1f} tok/s"
    return Baseline(chosen.id, chosen.profile, step, chosen.measured_tok_s, src)


def _fit_points(
    others: list[SpecPoint], base: Baseline | None
) -> tuple[list[tuple[float, float]], list[str]]:
    pts: list[tuple[float, float]] = []
    names: list[str] = []
    for o in others:
        if o.speculative and o.verify_ms is not None and o.draft_tokens is not None:
            pts.append((float(o.draft_tokens), o.verify_ms))
            names.append(f"#{o.id} {o.profile} ({o.draft_tokens} tokens, {o.verify_ms:.2f} ms)")
    if base is not None:
        pts.append((1.0, base.step_ms))
        names.append(f"#{base.id} {base.profile} decode step as the 1-token point ({base.step_ms:.2f} ms)")
    return pts, names


def _env(entries: dict[int, HistoryEntry], p: SpecPoint) -> dict[str, str]:
    e = entries.get(p.id)
    return dict(e.result.env or {}) if e else {}


def _flags(entries: dict[int, HistoryEntry], p: SpecPoint) -> dict[str, list[str]]:
    e = entries.get(p.id)
    return dict(split_argv(list(e.result.argv or []))[1]) if e else {}


def _drift(cm: ConfigMath, fit_cfgs: list[SpecPoint], entries: dict[int, HistoryEntry]) -> list[str]:
    """What the drift snapshots recorded with the results say changed on the box."""
    me = entries.get(cm.point.id)
    out: list[str] = []
    for o in fit_cfgs:
        other = entries.get(o.id)
        if me is None or other is None or not (usable(me.result.drift) and usable(other.result.drift)):
            continue
        out += [f"#{o.id} -> #{me.id}: {line}" for line in drift_lines(other.result.drift, me.result.drift)]
    return out


def _causes(cm: ConfigMath, fit_cfgs: list[SpecPoint], entries: dict[int, HistoryEntry]) -> list[Cause]:
    """Likely causes of a verify above the fit, each with what the recorded results show for it."""
    p = cm.point
    env = _env(entries, p)
    nccl: list[str] = []
    for o in fit_cfgs:
        for k, v in _env(entries, o).items():
            if k.startswith(NCCL_PREFIX) and env.get(k) != v:
                now = repr(env[k]) if k in env else "absent"
                nccl.append(
                    f"env {k}: {v!r} in #{o.id} {o.profile}, {now} in #{p.id} {p.profile} (recorded env)"
                )
    causes = [Cause("NCCL settings differ from the configs of the fit", sorted(set(nccl)))] if nccl else []
    flags = _flags(entries, p)
    graph: list[str] = []
    if "--disable-cuda-graph" in flags:
        graph.append(f"#{p.id} argv has --disable-cuda-graph")
    if (p.topk or 1) > 1:
        graph.append(
            f"#{p.id} argv: --speculative-eagle-topk {p.topk}: a tree verify, run in extend mode "
            "(check it is captured: `specdebug stacks --record` shows forward_extend vs forward_decode)"
        )
    if graph:
        causes.append(Cause("verify not under a CUDA graph (extend-mode verify)", graph))
    moved = _drift(cm, fit_cfgs, entries)
    if moved:
        causes.append(Cause("the box changed between these results (drift snapshots)", moved))
    if not causes:
        cm.notes.append(
            "the recorded argv/env show no cause; compare `specdebug stacks --record` of the configs"
        )
    return causes


def analyze(
    entries: list[HistoryEntry], base_entry: HistoryEntry | None = None
) -> tuple[Baseline | None, list[ConfigMath]]:
    """The arithmetic of the latest usable result of each config in the session."""
    usable = [e for e in entries if e.result.usable()]
    by_id = {e.id: e for e in usable}
    points = latest_per_config([point_of(e) for e in usable])
    base = _baseline(points, base_entry)
    out: list[ConfigMath] = []
    for p in points:
        cm = ConfigMath(point=p, notes=list(p.notes))  # figures left out come first
        if not p.single_stream:
            cm.notes.append("concurrency > 1: the per-stream arithmetic does not apply")
        if p.draft_ms is not None and p.verify_ms is not None:
            cm.cycle_ms, cm.cycle_source = arith.cycle_ms(p.draft_ms, p.verify_ms), "log"
        elif p.speculative and p.stream_cycle_ms is not None:
            cm.cycle_ms, cm.cycle_source = p.stream_cycle_ms, "stream"
        elif not p.speculative and base is not None and base.id == p.id:
            cm.cycle_ms, cm.cycle_source = base.step_ms, "baseline step"
        if cm.cycle_ms is not None and p.accept_len is not None:
            cm.predicted_tok_s = arith.predicted_tok_s(p.accept_len, cm.cycle_ms)
        if cm.predicted_tok_s is not None and p.measured_tok_s:
            cm.prediction_error_pct = (cm.predicted_tok_s - p.measured_tok_s) / p.measured_tok_s * 100.0
        if p.speculative and cm.cycle_ms is not None and base is not None:
            cm.break_even_accept_len = arith.break_even_accept_len(cm.cycle_ms, base.step_ms)
        if p.speculative:
            _fit_one(cm, [o for o in points if o is not p and o.single_stream], base, by_id)
        out.append(cm)
    return base, out


def _fit_one(
    cm: ConfigMath, others: list[SpecPoint], base: Baseline | None, by_id: dict[int, HistoryEntry]
) -> None:
    p = cm.point
    if p.draft_tokens is None:
        cm.notes.append("draft tokens not recorded: no fit")
        return
    if p.verify_ms is None:
        if cm.cycle_source == "stream":
            _fit_cycle(cm, others, base, by_id)
        else:
            cm.notes.append("verify time not recorded (log) and no cycle from the stream: no fit")
        return
    pts, names = _fit_points(others, base)
    line = arith.fit_line(pts)
    if line is None:
        cm.notes.append("cannot tell: the other configs give fewer than two token counts to fit")
        return
    cm.fit_of = "verify"
    cm.fit_verify_ms = line.at(p.draft_tokens)
    cm.fit_from = names
    ex = arith.excess(p.verify_ms, cm.fit_verify_ms)
    cm.verify_excess_pct = ex * 100.0 if ex is not None else None
    cm.verify_flagged = arith.flagged(p.verify_ms, cm.fit_verify_ms)
    fit_cfgs = [o for o in others if o.speculative and o.verify_ms is not None]
    if cm.verify_flagged:
        cm.causes = _causes(cm, fit_cfgs, by_id)
    _contended_fit(cm, fit_cfgs, others, base)


def _fit_cycle(
    cm: ConfigMath, others: list[SpecPoint], base: Baseline | None, by_id: dict[int, HistoryEntry]
) -> None:
    """No verify time logged: the cycle against a fit over the other configs' stream cycles."""
    p = cm.point
    assert p.draft_tokens is not None and cm.cycle_ms is not None
    pts: list[tuple[float, float]] = []
    names: list[str] = []
    for o in others:
        if o.speculative and o.stream_cycle_ms is not None and o.draft_tokens is not None:
            pts.append((float(o.draft_tokens), o.stream_cycle_ms))
            names.append(
                f"#{o.id} {o.profile} ({o.draft_tokens} tokens, stream cycle {o.stream_cycle_ms:.2f} ms)"
            )
    if base is not None:
        pts.append((1.0, base.step_ms))
        names.append(f"#{base.id} {base.profile} decode step as the 1-token point ({base.step_ms:.2f} ms)")
    line = arith.fit_line(pts)
    if line is None:
        cm.notes.append(
            "cannot tell: no verify time logged and the other configs' stream cycles give fewer than "
            "two token counts to fit"
        )
        return
    cm.fit_of = "cycle"
    cm.fit_cycle_ms = line.at(p.draft_tokens)
    cm.fit_from = names
    ex = arith.excess(cm.cycle_ms, cm.fit_cycle_ms)
    cm.cycle_excess_pct = ex * 100.0 if ex is not None else None
    cm.cycle_flagged = arith.flagged(cm.cycle_ms, cm.fit_cycle_ms)
    fit_cfgs = [o for o in others if o.speculative and o.stream_cycle_ms is not None]
    if cm.cycle_flagged:
        cm.causes = _causes(cm, fit_cfgs, by_id)
    _contended_fit(cm, fit_cfgs, others, base)


def _contended_fit(
    cm: ConfigMath, fit_cfgs: list[SpecPoint], others: list[SpecPoint], base: Baseline | None
) -> None:
    """A fit whose figures were measured on a contended CPU says so: a step or cycle read off can
    hide an excess (every figure slower by the same stalls) or make one (this config's alone)."""
    used = [cm.point, *fit_cfgs, *(o for o in others if base is not None and o.id == base.id)]
    hot = contended(used)
    if hot:
        cm.notes.append(
            f"the fit's verdict rests on results measured on a contended CPU ({', '.join(hot)}): a figure"
            " read off can hide an excess or make one; measure them again on a quiet machine"
        )
