"""What the Bench pane draws from results, apart from the widgets: the tok/s bar chart, the progress
line and the compare panel (pure functions of journal entries, so they are easy to test and reuse)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from specdebug.core.bench.models import BenchProgress
from specdebug.core.drift.compare import drift_lines
from specdebug.core.report import (
    HistoryEntry,
    config_diff,
    fmt,
    fmt_delta,
    metric_diff,
)
from specdebug.core.sanitize import visible

BAR_WIDTH = 30
NAME_WIDTH = 18
_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, top: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of `value` scaled so `top` fills `width` cells (eighth-cell resolution)."""
    if top <= 0 or value <= 0:
        return ""
    eighths = round(value / top * width * 8)
    full, rest = divmod(min(eighths, width * 8), 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def chart(entries: list[HistoryEntry]) -> Text:
    """tok/s of the latest successful run of each profile, in order of first appearance."""
    latest: dict[str, float] = {}
    for e in entries:
        v = e.result.headline()
        if e.result.status == "done" and v is not None:
            latest[e.result.profile or e.result.source_format] = v
    text = Text()
    if not latest:
        text.append("no results yet", style="dim")
        return text
    top = max(latest.values())
    width = min(max(len(n) for n in latest), NAME_WIDTH)
    for i, (name, v) in enumerate(latest.items()):
        if i:
            text.append("\n")
        short = name if len(name) <= width else name[: width - 1] + "…"
        text.append(f"{short:<{width}} ")
        text.append(bar(v, top), style="cyan" if v < top else "bold green")
        text.append(f" {v:.1f}")
    return text


def progress_text(p: BenchProgress | None, kind: str, profile: str | None) -> Text:
    if p is None:
        return Text(f"ready: b run ({kind}) · k kind · = baseline · c compare · x cancel", style="dim")
    t = Text(f"running {profile or '?'} ({kind}) ", style="bold")
    if p.phase == "warmup":
        t.append("warming up…")
    elif p.total_requests:
        t.append(f"{p.done_requests}/{p.total_requests} requests, {p.output_tokens} tokens")
        if p.tok_s:
            t.append(f", {p.tok_s:.1f} tok/s")
    else:
        t.append("external command running")
    t.append(f"  {p.elapsed_s:.1f} s", style="dim")
    if p.phase == "collecting":
        t.append("  collecting GPU state and server log…", style="dim")
    return t


def compare_renderable(a: HistoryEntry, b: HistoryEntry) -> Group:
    """Config diff + metric diff from run `a` to run `b` (order: report.compare_order, the
    table's direction), said explicitly so +x % can never be read the wrong way round."""
    title = Text("Compare ", style="bold")
    title.append(visible(f"from #{a.id} {a.result.profile or '?'}", tab=" "), style="bold")
    title.append("  ->  ", style="bold cyan")
    title.append(visible(f"to #{b.id} {b.result.profile or '?'}", tab=" "), style="bold")
    diffs = config_diff(a.result, b.result)
    cfg = Text("config: ", style="bold")
    if diffs:
        for line in diffs:
            cfg.append("\n  " + visible(line, tab=" "))
    else:
        cfg.append("same recorded config", style="dim")
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for col in ("metric", f"from #{a.id}", f"to #{b.id}", "change"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for name, x, y, d in metric_diff(a.result, b.result):
        style = "" if d is None or abs(d) < 2 else ("green" if (d > 0) != ("ms" in name) else "red")
        table.add_row(Text(name), fmt(x, 2), fmt(y, 2), Text(fmt_delta(d), style=style))
    note = Text(f"change: #{b.id} vs #{a.id}, like the table's vs base", style="dim")
    if a.result.drift or b.result.drift:  # what changed on the box (core.drift), when either side knows
        box = Text("box: ", style="bold")
        for line in drift_lines(a.result.drift, b.result.drift) or ["nothing compared changed"]:
            box.append("\n  " + visible(line, tab=" "))
        return Group(title, cfg, box, Text(""), table, note)
    return Group(title, cfg, Text(""), table, note)
