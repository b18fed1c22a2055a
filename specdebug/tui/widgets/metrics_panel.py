"""The numbers beside the log: the server's /metrics block on top, then one row per log-derived metric.

Why a widget of its own: the logs pane decides *what* to follow; this panel only shows two sources
of numbers side by side, each saying where it comes from, and keeps its rows in the house order
(`metric_rank`) as new metrics appear. It reads a MetricStore and MetricsEvents, never the box.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Sparkline, Static

from specdebug.core.logs.stats import MetricStore, metric_rank
from specdebug.tui.widgets.steady import Steady

if TYPE_CHECKING:
    from specdebug.core.metrics import MetricsEvent

__all__ = ["MetricRow", "MetricsPanel", "stats_line"]


class MetricRow(Vertical):
    """name + stats line + sparkline of the recent values."""

    DEFAULT_CSS = """
    MetricRow { height: 4; }
    MetricRow .metric-head { height: 1; }
    MetricRow .metric-stats { height: 2; color: $text-muted; }
    MetricRow Sparkline { height: 1; }
    """

    def __init__(self, name: str) -> None:
        super().__init__(classes="metric-row")
        self.metric = name

    def compose(self) -> ComposeResult:
        yield Static(Text(self.metric, style="bold"), classes="metric-head")
        yield Steady("", classes="metric-stats")
        yield Sparkline([], summary_function=max)

    def show(self, stats: dict[str, Any], recent: list[float]) -> None:
        self.query_one(".metric-stats", Static).update(Text(stats_line(stats)))
        self.query_one(Sparkline).data = list(recent)


def _f(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def stats_line(st: dict[str, Any]) -> str:
    return (
        f"n {st['n']}  last {_f(st['last'])}  mean {_f(st['mean'])}\n"
        f"p50 {_f(st['p50'])}  p90 {_f(st['p90'])}  min {_f(st['min'])}  max {_f(st['max'])}"
    )


class MetricsPanel(VerticalScroll):
    """The /metrics block (hidden until the first scrape), a title, and a MetricRow per metric."""

    DEFAULT_CSS = """
    MetricsPanel #metrics-title { height: 1; color: $text-muted; }
    MetricsPanel #metrics-prom { display: none; height: auto; margin-bottom: 1; }
    MetricsPanel #metrics-prom.visible { display: block; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: dict[str, MetricRow] = {}

    def compose(self) -> ComposeResult:
        yield Steady("", id="metrics-prom")  # the server's /metrics, beside the log's numbers
        yield Steady(Text("metrics"), id="metrics-title")

    # -- the log's numbers ---------------------------------------------------------------------------
    def show_stats(self, store: MetricStore, include_warmup: bool) -> None:
        """One row per metric with samples, in metric_rank order; a new metric is mounted in place."""
        summary = store.summary(include_warmup=include_warmup)
        for name in sorted(store.names(), key=metric_rank):
            series = store.series(name, include_warmup=include_warmup)
            if series is None or series.n == 0:
                continue
            row = self.rows.get(name)
            if row is None:
                row = self.rows[name] = MetricRow(name)
                later = [r for n, r in self.rows.items() if n != name and metric_rank(n) > metric_rank(name)]
                if later:
                    self.mount(row, before=min(later, key=lambda r: metric_rank(r.metric)))
                else:
                    self.mount(row)
            base, _, idx = name.rstrip("]").partition("[")
            st = summary.get(name)
            if st is None and idx.isdigit() and base in summary:
                st = {k: (v[int(idx)] if isinstance(v, list) else v) for k, v in summary[base].items()}
            if st is not None:
                if row.is_mounted:
                    row.show(st, list(series.recent))
                else:
                    row.call_after_refresh(row.show, st, list(series.recent))

    def clear_rows(self) -> None:
        """A new follow: its numbers start from nothing (the /metrics block stays until the next scrape)."""
        for row in self.rows.values():
            row.remove()
        self.rows.clear()

    # -- the server's /metrics -----------------------------------------------------------------------
    def show_prom(self, ev: MetricsEvent) -> None:
        """One scrape (rates, each with its source) or a state change (off, error) with its message."""
        from specdebug.core.metrics import describe_rates

        text = Text("server /metrics", style="bold")
        if ev.rates is not None:
            text.append(f" ({'rates over 1 s' if ev.rates.window_s else 'since start'})", style="dim")
            for label, value, source in describe_rates(ev.rates):
                text.append(f"\n{label} {value}", style="bold")
                text.append(f"\n  {source}", style="dim")
        else:
            text.append(f"\n{ev.message or ev.kind}", style="yellow")
        box = self.query_one("#metrics-prom", Static)
        box.update(text)
        box.add_class("visible")
        self.query_one("#metrics-title", Static).update(Text("log lines"))

    def show_prom_error(self, exc: BaseException) -> None:
        self.query_one("#metrics-prom", Static).update(Text(f"server /metrics: {exc}", style="yellow"))
