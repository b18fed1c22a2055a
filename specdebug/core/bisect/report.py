"""The session report's bisection section: knobs, trials, culprit, launches saved, the evidence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specdebug.core.bisect.models import Result
from specdebug.core.records import BisectResultRecord, JournalRecord


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _value(v: str | None) -> str:
    return "(absent)" if v is None else f"`{_cell(v)}`"


def bisect_markdown(events: Sequence[JournalRecord]) -> list[str]:
    """Markdown lines for every finished bisection of the session (empty when there is none)."""
    results = [ev.result for ev in events if isinstance(ev, BisectResultRecord)]
    if not results:
        return []
    out = ["## Bisection", ""]
    for r in results:
        out += _one(r)
    return out


def _one(r: Result) -> list[str]:
    good, bad = r.good.get("name", "?"), r.bad.get("name", "?")
    metric = r.evidence.metric if r.evidence else "metric"
    out = [f"### {good} (good) vs {bad} (bad): {r.verdict}", ""]
    if r.culprits:
        out.append(
            f"- culprit{'s' if len(r.culprits) > 1 else ''}: {', '.join(f'`{c}`' for c in r.culprits)}"
        )
    for name in r.culprits:
        eff = r.effects.get(name)
        if eff is not None and eff.share is not None and eff.low is not None and eff.high is not None:
            out.append(
                f"- `{_cell(name)}`: {eff.share:+.0%} of the gap ({eff.low:+.0%} to {eff.high:+.0%}, {_cell(eff.basis)})"
            )
    for st in r.sets:
        if "only together" in st.basis and st.share is not None:
            out.append(
                f"- together {', '.join(f'`{_cell(k)}`' for k in st.knobs)}: {st.share:+.0%} of the gap"
            )
    if r.explained is not None:
        out.append(f"- the culprits explain {r.explained:.0%} of the gap (confirmation launch)")
    saved = r.naive_launches - r.launches
    out.append(
        f"- launches: {r.launches} (one knob at a time: {r.naive_launches}"
        + (f", {saved} saved" if saved > 0 else "")
        + f"); search: {r.search or '-'}; bench {r.settings}; {r.duration_s:.0f} s"
    )
    if r.evidence is not None:
        e = r.evidence
        out.append(f"- ends: {_cell(e.why)}")
        if e.threshold is not None:
            band = f" +- {e.band:.2f}" if e.band is not None else ""
            out.append(f"- judged against {e.threshold:.2f}{band} ({e.threshold_source}) on {e.metric}")
        if e.drift is not None:
            d = e.drift
            out.append(
                f"- drift check: good end {d.before:.2f} -> {d.after:.2f}"
                + (" (beyond the noise)" if d.beyond_noise else " (within the noise)")
            )
    out += [f"- note: {_cell(n)}" for n in r.notes]
    out += [f"- warning: {_cell(w)}" for w in r.warnings]
    states = {c: "culprit" for c in r.culprits}
    out += ["", "| knob | kind | good | bad | |", "|---|---|---|---|---|"]
    for k in r.knobs:
        out.append(
            f"| `{_cell(k.name)}` | {k.kind} | {_value(k.good)} | {_value(k.bad)} | {states.get(k.name, '')} |"
        )
    out += ["", f"| # | role | knobs applied | fingerprint | {metric} | judged | cached | gated |"]
    out.append("|---|---|---|---|---:|---|---|---|")
    for t in r.trials:
        applied = ", ".join(f"`{_cell(a)}`" for a in t.applied) if t.role.value == "candidate" else "-"
        value = f"{t.metric:.2f}" if t.metric is not None else "-"
        if len(t.samples) > 1:
            value += f" ({len(t.samples)} runs)"
        judged = (t.judged.value if t.judged else "?") + (f": {_cell(t.reason)}" if t.reason else "")
        out.append(
            f"| {t.index} | {t.role.value} | {applied} | `{t.fingerprint}` | {value} | {judged} | "
            f"{'yes' if t.cached else ''} | {'yes' if t.gated else ''} |"
        )
    return [*out, ""]
