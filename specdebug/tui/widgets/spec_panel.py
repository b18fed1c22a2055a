"""The Bench pane's speculation-arithmetic panel (key `a`): the headless `specdebug spec`, drawn,
and below it the advice (`spec --advise`): which depth should be fastest, from the same session.

Pure: history entries in, a rich renderable out, from core.spec (the same numbers as the verb).
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from specdebug.core.report import HistoryEntry
from specdebug.core.sanitize import visible
from specdebug.core.spec.advise import advise, describe
from specdebug.core.spec.analyze import analyze


def _f(v: float | None, digits: int = 2) -> str:
    return "?" if v is None else f"{v:.{digits}f}"


def spec_renderable(entries: list[HistoryEntry], base: HistoryEntry | None, entry: HistoryEntry) -> Group:
    """The arithmetic of `entry`'s config against the session's other configs."""
    baseline, configs = analyze(entries, base)
    mine = next((c for c in configs if c.point.fingerprint == entry.result.fingerprint), None)
    title = Text("Speculation arithmetic ", style="bold")
    title.append(visible(f"#{entry.id} {entry.result.profile or '?'}", tab=" "), style="bold")
    if mine is None:
        return Group(title, Text("not a usable result: no arithmetic", style="dim"))
    p = mine.point
    lines = [title]
    if baseline is not None:
        lines.append(Text(visible(f"baseline: {baseline.source} -> {baseline.step_ms:.2f} ms/step", tab=" ")))
    if p.speculative and mine.cycle_source == "stream":  # no verify time logged (vLLM)
        lines.append(
            Text(
                f"cycle {_f(mine.cycle_ms)} ms from the stream (median gap between token bursts),"
                f" {p.draft_tokens or '?'} tokens verified"
            )
        )
    elif p.speculative:
        lines.append(
            Text(
                f"cycle {_f(mine.cycle_ms)} ms = draft {_f(p.draft_ms)} + verify {_f(p.verify_ms)} ms,"
                f" {p.draft_tokens or '?'} tokens verified"
            )
        )
    err = f" ({mine.prediction_error_pct:+.1f} %)" if mine.prediction_error_pct is not None else ""
    lines.append(
        Text(
            f"predicts {_f(mine.predicted_tok_s, 1)} tok/s (accept {_f(p.accept_len)}); "
            f"measured {_f(p.measured_tok_s, 1)}{err}"
        )
    )
    if mine.break_even_accept_len is not None:
        lines.append(Text(f"break-even accept length {mine.break_even_accept_len:.2f}"))
    if mine.fit_verify_ms is not None:
        flag = Text(
            f"verify {_f(p.verify_ms)} ms vs fit {mine.fit_verify_ms:.2f} ms ({mine.verify_excess_pct:+.0f} %)"
        )
        if mine.verify_flagged:
            flag.append("  ABOVE THE FIT", style="bold red")
        lines.append(flag)
    if mine.fit_cycle_ms is not None and mine.cycle_excess_pct is not None:
        flag = Text(
            f"cycle {_f(mine.cycle_ms)} ms vs fit {mine.fit_cycle_ms:.2f} ms ({mine.cycle_excess_pct:+.0f} %)"
        )
        if mine.cycle_flagged:
            flag.append("  ABOVE THE FIT", style="bold red")
        lines.append(flag)
    for c in mine.causes:
        lines.append(Text(visible(f"likely cause: {c.cause}", tab=" "), style="yellow"))
        lines += [Text(visible(f"  {e}", tab=" "), style="dim") for e in c.evidence[:6]]
    lines += [Text(visible(f"note: {n}", tab=" "), style="dim") for n in mine.notes]
    lines += advice_lines(entries, base, entry)
    return Group(*lines)


def advice_lines(entries: list[HistoryEntry], base: HistoryEntry | None, entry: HistoryEntry) -> list[Text]:
    """`spec --advise` for the entry's config: the same lines the verb prints, the verdict bold."""
    res = entry.result
    if not res.argv:
        return []
    adv = advise(entries, base, res.profile or "?", list(res.argv), res.fingerprint)
    out = [Text(""), Text("Which depth is fastest (spec --advise)", style="bold")]
    for line in describe(adv)[1:]:
        verdict = line.lstrip().startswith(("best:", "verdict:"))
        style = "bold" if verdict else ("dim" if line.lstrip().startswith(("input:", "note:")) else "")
        out.append(Text(visible(line, tab=" "), style=style))
    return out
