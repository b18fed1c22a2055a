"""Which speculation depth is fastest here (issue 42): the session's measured configs through the
advisor's model (core.spec.model, docs/spec-advisor.md), a prediction with an interval for each
depth of a small grid around what was run, the best named with its gain over the current config,
and the measurement that would most narrow the choice; "cannot tell" where the data cannot decide.

The configs used are the current profile's family: the same engine and speculative method (an
n-gram run says nothing about an EAGLE drafter's acceptance), a chain of drafts (topk 1), one
stream.  Every input is named with its source in `inputs`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from specdebug.core.bench.bursts import reach_by_position, recompute
from specdebug.core.bench.models import BenchResult
from specdebug.core.deployment.place import with_flags
from specdebug.core.fingerprint import split_argv
from specdebug.core.report import HistoryEntry
from specdebug.core.spec import model as m
from specdebug.core.spec.analyze import ConfigMath, analyze
from specdebug.core.spec.points import contended, spec_shape
from specdebug.engines import ENGINES
from specdebug.engines.base import Engine

#: the grid reaches this far past the measured depths (the real tier's 1 and 3 -> 2, 4, 5)
GRID_BELOW, GRID_ABOVE = 1, 2
MAX_DEPTH = 16


@dataclass
class Candidate:
    depth: int
    config: str  # the flags that set this depth
    predicted_tok_s: float | None = None
    low: float | None = None
    high: float | None = None
    tokens_per_cycle: float | None = None
    cycle_ms: float | None = None
    extrapolated: bool = False
    measured_tok_s: float | None = None  # a config in the fit at this depth
    measured_by: str | None = None
    note: str | None = None  # why there is no prediction


@dataclass
class Best:
    depth: int
    config: str
    predicted_tok_s: float
    low: float
    high: float
    decided: bool  # False: another candidate's interval reaches it (cannot tell)
    gain_pct: float | None = None  # against the current config's measured tok/s
    gain_low_pct: float | None = None
    gain_high_pct: float | None = None


@dataclass
class Advice:
    profile: str
    current_depth: int | None
    current_tok_s: float | None
    current_source: str | None
    candidates: list[Candidate] = field(default_factory=list)
    best: Best | None = None
    verdict: str = "cannot tell"
    measure_next: str | None = None
    baseline_tok_s: float | None = None  # plain decode, measured (depth 0)
    speculation_pays: bool | None = None  # the best depth against plain decode (None: cannot tell)
    cycle_model: str | None = None
    inputs: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def candidate(self, depth: int) -> Candidate | None:
        return next((c for c in self.candidates if c.depth == depth), None)


# ---------------------------------------------------------------------------------------------
# configs: family, depth, and the argv of another depth


def _engine(argv: list[str] | None) -> tuple[Engine, dict[str, list[str]]] | None:
    """The engine whose speculative switch the argv holds, with the split flags (None: no speculation)."""
    flags = dict(split_argv(list(argv or []))[1])
    for engine in ENGINES.values():
        shape = engine.spec_shape(flags)
        if shape is not None:
            return (engine, flags) if shape[0] else None
    return None


def family(argv: list[str] | None) -> str | None:
    """The engine and speculative method of an argv (None: no speculation)."""
    found = _engine(argv)
    return found[0].spec_method(found[1]) if found else None


def with_depth(argv: list[str], depth: int) -> list[str]:
    """`argv` with `depth` drafts per cycle, topk kept (the engine's own flags: Engine.spec_depth_flags)."""
    found = _engine(argv)
    if found is None:
        raise ValueError("no speculative decoding in the argv")
    return with_flags(argv, found[0].spec_depth_flags(found[1], depth))


def depth_flags(argv: list[str] | None, depth: int) -> str:
    """The flags that say `depth`, as a user would type them."""
    found = _engine(argv)
    if found is None:
        return f"depth {depth}"
    return " ".join(
        f"{name} {' '.join(values)}" for name, values in found[0].spec_depth_flags(found[1], depth)
    )


# ---------------------------------------------------------------------------------------------
# inputs of one config


def _accept_obs(cm: ConfigMath, res: BenchResult, depth: int) -> m.AcceptObs:
    p = cm.point
    name = f"#{p.id} {p.profile}"
    rates = res.server_prom.rates if res.server_prom is not None else None
    if rates is not None and rates.per_position:
        return m.AcceptObs(
            name, depth, list(rates.per_position), count=rates.drafts,
            source=f"/metrics {rates.sources.get('per_position', 'per position')}",
        )  # fmt: skip
    if res.spec is not None and res.spec.per_position_acceptance_pct:
        pct = res.spec.per_position_acceptance_pct
        return m.AcceptObs(
            name, depth, [v / 100 for v in pct], count=res.spec.drafts, source="benchmark output"
        )
    if res.stream_cycles is not None and res.stream_cycles.tokens_exact:
        sc = recompute(res.stream_cycles, depth + 1)
        reach = reach_by_position(sc, depth)
        if reach is not None:
            return m.AcceptObs(
                name, depth, reach, count=float(sum(sc.tokens_per_burst.values())),
                source=f"stream tokens per burst ({sum(sc.tokens_per_burst.values())} bursts)",
            )  # fmt: skip
    return m.AcceptObs(name, depth, accept_len=p.accept_len, source=p.sources.get("accept_len", "?"))


def _noise(entries: list[HistoryEntry], cm: ConfigMath) -> tuple[float, str]:
    """The config's relative noise: repeated results of it, else the bench's per-request spread."""
    p = cm.point
    same = [e for e in entries if e.result.fingerprint == p.fingerprint and e.result.usable()]
    rel = m.relative_noise([e.result.headline() or 0.0 for e in same])
    if rel is not None:
        return max(rel, m.NOISE_FLOOR), f"spread of {len(same)} results of the config ({rel * 100:.1f} %)"
    res = next((e.result for e in same if e.id == p.id), None)
    tpot = res.tpot_ms if res is not None else None
    n = (res.successful_requests or 0) if res is not None else 0
    if tpot is not None and tpot.std is not None and tpot.mean and n >= 2:
        rel = tpot.std / tpot.mean / n**0.5
        return max(rel, m.NOISE_FLOOR), f"per-request spread of #{p.id} ({rel * 100:.1f} % over {n} requests)"
    return m.NOISE_FLOOR, f"no repeat, no per-request spread: the floor {m.NOISE_FLOOR * 100:.1f} %"


def _cycle_point(cm: ConfigMath, depth: int, noise: tuple[float, str]) -> m.CyclePoint | None:
    p = cm.point
    name = f"#{p.id} {p.profile}"
    if p.accept_len is not None and p.measured_tok_s:
        cycle = p.accept_len * 1000.0 / p.measured_tok_s
        src = f"accept length {p.accept_len:.3f} x 1000 / measured {p.measured_tok_s:.1f} tok/s"
    elif cm.cycle_ms is not None:
        cycle, src = cm.cycle_ms, f"cycle from {cm.cycle_source}"
    else:
        return None
    return m.CyclePoint(name, depth, cycle, noise[0], src, noise[1])


# ---------------------------------------------------------------------------------------------
# the advice


def advise(
    entries: list[HistoryEntry],
    base_entry: HistoryEntry | None,
    profile: str,
    argv: list[str],
    fingerprint: str | None = None,
) -> Advice:
    """Predict tok/s at each depth of the grid for the profile (`argv`: its launch argv)."""
    usable = [e for e in entries if e.result.usable()]
    by_id = {e.id: e for e in usable}
    base, configs = analyze(usable, base_entry)
    mine = next((c for c in configs if fingerprint and c.point.fingerprint == fingerprint), None)
    mine = mine or next((c for c in reversed(configs) if c.point.profile == profile), None)
    fam = family(argv)
    adv = Advice(profile, None, None, None)
    if fam is None:
        adv.verdict = f"cannot tell: {profile} has no speculative decoding in its argv (nothing to tune)"
        return adv
    members = _members(adv, configs, fam, by_id)
    cur = next((d for cm, d in members if mine is not None and cm is mine), None)
    _, tokens, topk, _ = spec_shape(argv)
    adv.current_depth = cur if cur is not None else (tokens - 1 if tokens and (topk or 1) == 1 else None)
    if mine is not None and mine.point.measured_tok_s:
        adv.current_tok_s = mine.point.measured_tok_s
        adv.current_source = (
            f"#{mine.point.id} {mine.point.profile}: {mine.point.sources.get('measured_tok_s')}"
        )
    if (topk or 1) > 1:
        adv.verdict = f"cannot tell: {profile} drafts a tree (topk {topk}); the model is for a chain (topk 1)"
        return adv
    if not members:
        adv.verdict = "cannot tell: no measured config of this speculative method in the session"
        return adv
    acc = m.accept_model([_accept_obs(cm, by_id[cm.point.id].result, d) for cm, d in members])
    adv.inputs += [f"acceptance: {s}" for s in acc.sources]
    points: list[m.CyclePoint] = []
    for cm, d in members:
        cp = _cycle_point(cm, d, _noise(usable, cm))
        if cp is None:
            adv.left_out.append(f"#{cm.point.id} {cm.point.profile}: no cycle time and no measured tok/s")
            continue
        points.append(cp)
        adv.inputs.append(
            f"cycle: {cp.config} depth {d}: {cp.cycle_ms:.2f} ms ({cp.source}); noise {cp.noise_source}"
        )
    draft = _draft_step(members, adv)
    if base is not None:
        adv.baseline_tok_s = base.tok_s
        adv.inputs.append(f"baseline decode step {base.step_ms:.2f} ms ({base.source})")
    cyc = m.cycle_model(points, base.step_ms if base else None, draft)
    if isinstance(cyc, str):
        adv.verdict = cyc
        return adv
    _left_out(adv, cyc, configs)
    adv.cycle_model = cyc.describe()
    adv.notes += cyc.notes
    _contended(adv, [cm for cm, _ in members], configs, base.id if base else None)
    _grid(adv, acc, cyc, members, argv)
    _decide(adv)
    return adv


def _contended(adv: Advice, members: list[ConfigMath], configs: list[ConfigMath], base: int | None) -> None:
    """Advice over results measured on a contended CPU says so: their cycles and tok/s may be off."""
    used = [*members, *(c for c in configs if c.point.id == base and c not in members)]
    hot = contended(c.point for c in used)
    if hot:
        adv.notes.append(
            f"the advice rests on results measured on a contended CPU ({', '.join(hot)}): their cycles and"
            " tok/s may be off; measure them again on a quiet machine"
        )


def _members(
    adv: Advice, configs: list[ConfigMath], fam: str, by_id: dict[int, HistoryEntry]
) -> list[tuple[ConfigMath, int]]:
    """The session's configs of the profile's family, with their depth; the others named."""
    out: list[tuple[ConfigMath, int]] = []
    for cm in configs:
        p = cm.point
        if not p.speculative or p.id not in by_id:
            continue
        name = f"#{p.id} {p.profile}"
        argv = list(by_id[p.id].result.argv or [])
        if family(argv) != fam:
            adv.left_out.append(f"{name}: another speculative method ({family(argv)})")
        elif not p.single_stream:
            adv.left_out.append(f"{name}: concurrency > 1 (the model is per stream)")
        elif (p.topk or 1) > 1:
            adv.left_out.append(f"{name}: topk {p.topk} (a tree; the model is for a chain)")
        elif p.draft_tokens is None:
            adv.left_out.append(f"{name}: draft tokens not in its argv")
        else:
            _, tokens, _, _ = spec_shape(argv)
            out.append((cm, (tokens or p.draft_tokens) - 1))
    return out


def _draft_step(members: list[tuple[ConfigMath, int]], adv: Advice) -> float | None:
    """ms per draft step from the draft lines (SGLang); None where no config logs them."""
    steps = [(cm.point.draft_ms / d, cm) for cm, d in members if cm.point.draft_ms is not None and d > 0]
    steps = [(s, cm) for s, cm in steps if "draft_ms" in cm.point.sources]
    if not steps:
        adv.inputs.append(
            "draft step: no draft lines logged (n-gram, or an engine that logs none): 0 ms as the lower bound"
        )
        return None
    mean = sum(s for s, _ in steps) / len(steps)
    names = ", ".join(f"#{cm.point.id}" for _, cm in steps)
    adv.inputs.append(f"draft step {mean:.2f} ms (draft lines of {names} / their steps)")
    return mean


def _left_out(adv: Advice, cyc: m.CycleModel, configs: list[ConfigMath]) -> None:
    by_name = {f"#{c.point.id} {c.point.profile}": c for c in configs}
    for p, why in cyc.left_out:
        line = f"{p.config}: {why}: another problem (left out of the fit; its acceptance is kept)"
        cm = by_name.get(p.config)
        if cm is not None and cm.causes:
            line += "; likely cause " + "; ".join(c.cause for c in cm.causes)
        adv.left_out.append(line)
        if p.depth == adv.current_depth:
            adv.notes.append(
                f"the current config {p.config} sits off the fit: the predictions are for this box without "
                "that problem (fix it first: `specdebug spec` names the causes)"
            )


def _grid(
    adv: Advice, acc: m.AcceptModel, cyc: m.CycleModel, members: list[tuple[ConfigMath, int]], argv: list[str]
) -> None:
    depths = [d for _, d in members]
    lo, hi = max(1, min(depths) - GRID_BELOW), min(MAX_DEPTH, max(depths) + GRID_ABOVE)
    in_fit = {name for p in cyc.points for name in p.config.split(", ")}
    for k in range(lo, hi + 1):
        c = Candidate(k, depth_flags(argv, k))
        pred = m.predict(k, acc, cyc)
        if pred is None and acc.tokens(k) is not None:
            c.note = f"cannot tell: the cycle line reaches no positive time at depth {k}"
        elif pred is None:
            c.note = (
                f"cannot tell: acceptance of positions up to {k} not measured (no per-position figures)"
                if k < acc.deepest
                else f"cannot tell: past position {acc.deepest} the conditional acceptance of it is needed, "
                "and the position before it was never measured alone (no per-position figures)"
            )
        else:
            c.predicted_tok_s, c.low, c.high = pred.predicted_tok_s, pred.low, pred.high
            c.tokens_per_cycle, c.cycle_ms, c.extrapolated = (
                pred.tokens.mid,
                pred.cycle.mid,
                pred.tokens.extrapolated,
            )
        for cm, d in members:
            name = f"#{cm.point.id} {cm.point.profile}"
            if d == k and name in in_fit:
                c.measured_tok_s, c.measured_by = cm.point.measured_tok_s, name
        adv.candidates.append(c)


def _decide(adv: Advice) -> None:
    """The best by its prediction; decided only when no other interval reaches its low end."""
    cands = [c for c in adv.candidates if c.predicted_tok_s is not None]
    if len(cands) < 2:
        adv.verdict = "cannot tell: fewer than two depths can be predicted"
        return
    best = max(cands, key=lambda c: c.predicted_tok_s or 0.0)
    assert best.predicted_tok_s is not None and best.low is not None and best.high is not None
    rivals = [c for c in cands if c is not best and (c.high or 0.0) >= best.low]
    b = Best(best.depth, best.config, best.predicted_tok_s, best.low, best.high, decided=not rivals)
    if adv.current_tok_s:
        cur = adv.current_tok_s
        b.gain_pct = (b.predicted_tok_s / cur - 1) * 100
        b.gain_low_pct, b.gain_high_pct = (b.low / cur - 1) * 100, (b.high / cur - 1) * 100
    adv.best = b
    runner_up = sorted(cands, key=lambda c: c.predicted_tok_s or 0.0)[-2]
    contenders = [best, *rivals] if rivals else [best, runner_up]
    unmeasured = [c for c in contenders if c.measured_by is None]
    # the unmeasured contender that could most beat the others: its measurement settles the most
    widest = (
        max(unmeasured, key=lambda c: c.high or 0.0) if unmeasured else max(contenders, key=_relative_width)
    )
    gain = (
        f", {b.gain_pct:+.0f} % against the current {adv.current_tok_s:.1f} tok/s"
        if b.gain_pct is not None
        else ""
    )
    if rivals:
        names = ", ".join(str(c.depth) for c in rivals)
        adv.verdict = (
            f"cannot tell between depth {best.depth} ({best.predicted_tok_s:.1f} tok/s, likeliest) and "
            f"depth {names}: their intervals overlap"
        )
    else:
        adv.verdict = (
            f"depth {best.depth}: {best.predicted_tok_s:.1f} tok/s ({best.low:.1f}..{best.high:.1f}){gain}"
        )
    _against_plain_decode(adv, b)
    if widest.measured_by is None:
        adv.measure_next = (
            f"depth {widest.depth} ({widest.config}): the contender whose interval reaches highest "
            f"({widest.high:.1f} tok/s)"
        )
    else:
        adv.measure_next = (
            f"repeat depth {widest.depth} ({widest.measured_by}): the contenders are all measured"
        )


def _against_plain_decode(adv: Advice, b: Best) -> None:
    """Does the best depth beat no speculation at all (the baseline, measured)?"""
    plain = adv.baseline_tok_s
    if plain is None:
        return
    if b.high < plain:
        adv.speculation_pays = False
        adv.verdict = (
            f"no depth beats plain decode ({plain:.1f} tok/s measured): speculation costs here; the best "
            f"depth {b.depth} would give {b.predicted_tok_s:.1f} ({b.low:.1f}..{b.high:.1f})"
        )
    elif b.low > plain:
        adv.speculation_pays = True
    else:
        adv.notes.append(
            f"plain decode's {plain:.1f} tok/s lies within the best depth's interval: cannot tell "
            "whether speculation pays here"
        )


def _relative_width(c: Candidate) -> float:
    return ((c.high or 0.0) - (c.low or 0.0)) / (c.predicted_tok_s or 1.0)


# ---------------------------------------------------------------------------------------------
# text


def _f1(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f}"


def _f2(v: float | None) -> str:
    return "?" if v is None else f"{v:.2f}"


def describe(adv: Advice) -> list[str]:
    """The advice as text lines: `spec --advise` prints them, the TUI's spec panel draws them."""
    cur = f"depth {adv.current_depth}" if adv.current_depth is not None else "depth ?"
    now = f", measured {adv.current_tok_s:.1f} tok/s [{adv.current_source}]" if adv.current_tok_s else ""
    lines = [f"advice for {adv.profile} (current {cur}{now})"]
    if adv.cycle_model:
        lines.append(f"  {adv.cycle_model}")
    if adv.candidates:
        lines.append("  depth  predicted tok/s (low..high)  tokens/cycle  cycle ms  measured")
    for c in adv.candidates:
        star = "*" if adv.best is not None and c.depth == adv.best.depth else " "
        if c.predicted_tok_s is None:
            lines.append(f"  {c.depth:>4}{star} {c.note}")
            continue
        measured = f"{_f1(c.measured_tok_s)} ({c.measured_by})" if c.measured_by else "-"
        extra = " extrapolated" if c.extrapolated else ""
        lines.append(
            f"  {c.depth:>4}{star} {c.predicted_tok_s:7.1f} ({_f1(c.low)}..{_f1(c.high)})"
            f"{'':8}{_f2(c.tokens_per_cycle)}{extra:13} {_f2(c.cycle_ms):>8}  {measured}"
        )
    lines.append(f"  {'best' if adv.best and adv.best.decided else 'verdict'}: {adv.verdict}")
    if adv.measure_next:
        lines.append(f"  measure next: {adv.measure_next}")
    lines += [f"  input: {i}" for i in adv.inputs]
    lines += [f"  left out: {x}" for x in adv.left_out]
    lines += [f"  note: {n}" for n in adv.notes]
    return lines
