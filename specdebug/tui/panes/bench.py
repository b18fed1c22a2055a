"""Bench pane: run a benchmark with one key, keep every result, compare runs.

The run is `specdebug.core.bench.runner.bench_events`, the same stream as `specdebug bench`; this
pane renders progress (batched on a timer), the session history from the journal (so reopening a
session shows it), a bar chart of tok/s by profile, and a compare panel (config diff + metric
diff) for two runs. Profile names, warnings and external output are remote or user text, so
they are rendered as plain `Text` with control characters shown as escapes.

A failed run (more than 5 % of requests failed, no result) stays in the table, marked, but is
never the baseline, never given a delta and never compared, unless the user toggles "include
failed runs" (f), the twin of `specdebug history --include-failed`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widgets import DataTable, Log, Static

from specdebug.core.bench.events import BenchLine
from specdebug.core.bench.headline import headline_text
from specdebug.core.bench.models import BenchProgress, BenchResult
from specdebug.core.bench.runner import BenchRequest, target_bench_events
from specdebug.core.control import actions as server_control
from specdebug.core.profiles import Profile
from specdebug.core.records import JournalRecord
from specdebug.core.report import (
    HistoryEntry,
    baseline_event,
    baseline_of,
    comparable,
    compare_order,
    delta_vs,
    fmt,
    fmt_delta,
    fmt_time,
    history,
)
from specdebug.core.sanitize import visible
from specdebug.core.target import Target
from specdebug.engines.primitives import ANSI_RE
from specdebug.remote.api import Remote
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane, describe_error
from specdebug.tui.panes.bench_view import bar, chart, compare_renderable, progress_text
from specdebug.tui.views_action import open_report
from specdebug.tui.widgets.measured_table import MeasuredTable
from specdebug.tui.widgets.spec_panel import spec_renderable
from specdebug.tui.widgets.steady import Steady

__all__ = ["BenchPane", "bar", "chart", "compare_renderable", "progress_text"]

COLUMNS = [
    ("#", "id"),
    ("profile", "profile"),
    ("tok/s", "tok_s"),
    ("vs base", "delta"),
    ("accept len", "accept"),
    ("verify ms", "verify"),
    ("TTFT ms", "ttft"),
    ("GPU", "gpu"),
    ("time", "time"),
]


async def not_running_hint(remote: Remote, profile: Profile) -> str | None:
    """After a failed run: when the profile's server is not running (and nothing else listens on
    its port) the failure is that, and what to do is one line; None when it cannot tell."""
    try:
        st = await server_control.status(remote, profile)
    except Exception:  # the status could not be read: the benchmark's own error is the news
        return None
    if st.state == "running" or (st.port_holder is not None and st.port_holder.listening):
        return None
    return f"{profile.name} is not running: press 2, then l (launch it in the Startup pane)"


class BenchPane(Pane):
    PANE_ID = "bench"
    TITLE = "Bench"
    MUTATING_ACTIONS = frozenset({"run"})
    IN_TURN_ACTIONS = frozenset({"baseline", "compare", "spec", "bisect_end"})  # the highlighted run
    BINDINGS = [
        Binding("b", "run", "Run benchmark", id="bench.run"),
        Binding("x", "cancel", "Cancel", id="bench.cancel"),
        Binding("k", "toggle_kind", "Builtin/external", id="bench.kind"),
        Binding("equals_sign", "baseline", "Set baseline", id="bench.baseline", key_display="="),
        Binding("c", "compare", "Compare", id="bench.compare"),
        Binding("a", "spec", "Speculation arithmetic", id="bench.spec", show=False),  # `specdebug spec`
        Binding("escape", "close_compare", "Close compare", id="bench.close_compare", show=False),
        Binding("f", "toggle_failed", "Include failed runs", id="bench.include_failed", show=False),
        Binding("R", "report", "Session report", id="bench.report", show=False),  # `specdebug report`
        Binding("r", "reload", "Reload history", id="bench.reload", show=False),
        # in help and the palette, not the footer; B because b runs a benchmark
        Binding("g", "bisect_end('good')", "Bisect: good end", id="bench.bisect_good", show=False),
        Binding("B", "bisect_end('bad')", "Bisect: bad end", id="bench.bisect_bad", show=False),
    ]
    DEFAULT_CSS = """
    BenchPane { layout: vertical; }
    BenchPane #bench-status { height: 1; padding: 0 1; }
    BenchPane #bench-main { height: 1fr; }
    BenchPane #bench-table { width: 1fr; }
    BenchPane #bench-side { width: 62; padding: 0 1; }
    BenchPane #bench-chart { height: auto; margin-bottom: 1; }
    BenchPane #bench-compare { height: auto; display: none; }
    BenchPane #bench-compare.-shown { display: block; }
    BenchPane #bench-output { height: 8; display: none; }
    BenchPane #bench-output.-shown { display: block; }
    BenchPane.-narrow #bench-main { layout: vertical; }
    BenchPane.-narrow #bench-table { width: 1fr; height: 1fr; }
    BenchPane.-narrow #bench-side { width: 1fr; height: auto; }
    BenchPane.-narrow #bench-chart { display: none; }
    """

    class ResultReady(Message):
        def __init__(self, result: BenchResult) -> None:
            super().__init__()
            self.result = result

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(ctx, **kwargs)
        self.entries: list[HistoryEntry] = []
        self.events: list[JournalRecord] = []
        self.baseline_ts: float | None = None
        self.kind: Literal["builtin", "external"] = "builtin"
        self.progress: BenchProgress | None = None
        self.running_profile: str | None = None
        self.picked: HistoryEntry | None = None
        self.compared: tuple[int, int] | None = None  # ids of the runs in the compare panel
        self.include_failed = False  # failed runs may be a baseline or compared (user's choice)
        self._lines: list[str] = []
        self._dirty = False

    def compose(self) -> ComposeResult:
        yield Steady(progress_text(None, self.kind, None), id="bench-status")
        with Horizontal(id="bench-main"):
            table: DataTable[Any] = MeasuredTable(id="bench-table", cursor_type="row", zebra_stripes=True)
            for label, key in COLUMNS:
                table.add_column(label, key=key)
            yield table
            with Vertical(id="bench-side"):
                yield Steady(id="bench-chart")
                yield Steady(id="bench-compare")
        yield Log(id="bench-output", highlight=False, max_lines=2000)

    def on_mount(self) -> None:
        self.reload()

    # ---- data ------------------------------------------------------------------------------------
    def reload(self) -> None:
        """Read the session journal again (a reopened session shows its history)."""
        journal = self.ctx.journal
        if journal is not None:
            self.events = journal.records()
            self.entries = history(self.events)
            base = baseline_of(self.events, self.entries, include_failed=self.include_failed)
            self.baseline_ts = base.ts if base else None
        self._render_table()

    def show_results(self, results: list[BenchResult], baseline: int | None = None) -> None:
        """Feed results directly (tests and snapshots; no journal, no clock)."""
        self.entries = [
            HistoryEntry(id=i + 1, ts=r.started_at or float(i), result=r) for i, r in enumerate(results)
        ]
        self.baseline_ts = self.entries[baseline].ts if baseline is not None and self.entries else None
        self._render_table()

    def _baseline(self) -> HistoryEntry | None:
        usable = comparable(self.entries, include_failed=self.include_failed)
        for e in usable:
            if self.baseline_ts is not None and abs(e.ts - self.baseline_ts) < 1e-6:
                return e
        return usable[0] if usable else None

    def _refuse_failed(self, *entries: HistoryEntry) -> bool:
        """True (and says why) when one of the runs failed and failed runs are not included."""
        bad = next((e for e in entries if not e.result.usable()), None)
        if bad is None or self.include_failed:
            return False
        reason = bad.result.failure_reason or bad.result.status
        self.notify(
            f"#{bad.id} failed ({reason}): not a result; press f to include failed runs",
            severity="warning",
            markup=False,
        )
        return True

    def _row(self, e: HistoryEntry, base: HistoryEntry | None) -> list[str | Text]:
        r = e.result
        accept = r.server.accept_len if r.server and r.server.accept_len is not None else r.accept_length
        gpu_w = r.gpu_warnings()
        if base is e:
            delta = Text("base", style="bold")
        elif not r.usable() and not self.include_failed:
            delta = Text(r.status.upper(), style="bold red")
        else:
            d = delta_vs(e, base, include_failed=self.include_failed)
            delta = Text(fmt_delta(d), style="" if d is None or abs(d) < 2 else ("green" if d > 0 else "red"))
        status = "" if r.status == "done" else f" ({r.status})"
        return [
            str(e.id),
            Text(visible((r.profile or r.source_format) + status, tab=" "), style="red" if status else ""),
            Text(fmt(r.headline()), style="bold"),
            delta,
            fmt(accept, 2),
            fmt(r.server.verify_ms if r.server else None, 2),
            fmt(r.ttft_ms.p50 if r.ttft_ms.p50 is not None else r.ttft_ms.mean),
            Text(f"{len(gpu_w)} warn", style="bold red")
            if gpu_w
            else (Text("ok", style="green") if r.gpu_before else Text("n/a", style="dim")),  # no nvidia-smi
            fmt_time(r.started_at or e.ts)[11:],
        ]

    def _render_table(self) -> None:
        table = self.query_one("#bench-table", DataTable)
        row = table.cursor_row
        table.clear()
        base = self._baseline()
        for e in self.entries:
            table.add_row(*self._row(e, base), key=str(e.id))
        if self.entries:
            table.move_cursor(row=min(row, len(self.entries) - 1), animate=False)
        self.query_one("#bench-chart", Static).update(chart(self.entries))

    def _highlighted(self) -> HistoryEntry | None:
        table = self.query_one("#bench-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((e for e in self.entries if str(e.id) == key), None)

    # ---- running ---------------------------------------------------------------------------------
    def action_run(self) -> None:
        if self.progress is not None:
            self.notify("a benchmark is already running (x cancels it)", severity="warning")
            return
        target = self.acting_target()
        if target is None:
            return
        self.running_profile = target.profile.name
        self.progress = BenchProgress(phase="warmup")
        self._lines.clear()
        log = self.query_one("#bench-output", Log)
        log.clear()
        log.set_class(self.kind == "external", "-shown")
        self._dirty = True
        self.run_bench(target, self.kind)

    @work(exclusive=True, group="bench-run", exit_on_error=False)
    async def run_bench(self, target: Target, kind: Literal["builtin", "external"]) -> None:
        """The leader serves: it is benchmarked as its node runs it (its record, its log), and on a
        deployment every node's GPUs are recorded and a dead node refuses the run (as `bench`)."""
        leader = target.leader
        try:
            result = None
            async for ev in target_bench_events(target, BenchRequest(kind=kind), journal=self.ctx.journal):
                if isinstance(ev, BenchProgress):
                    self.progress = ev
                    self._dirty = True
                elif isinstance(ev, BenchLine):
                    self._lines.append(ev.text)
                    self._dirty = True
                else:
                    result = ev.result
        except asyncio.CancelledError:
            self._end_run("benchmark cancelled (nothing recorded)", "warning")
            raise
        except Exception as exc:  # one toast per run, named even when the error has no message
            hint = await not_running_hint(target.remote(leader), leader.profile)
            self._end_run(hint or f"benchmark failed: {describe_error(exc)}", "error")
            return
        self.progress = None
        self._dirty = True
        if result is not None:
            self.post_message(self.ResultReady(result))

    def _end_run(self, message: str, severity: SeverityLevel) -> None:
        """A run ended without a result: say it once (a second end of the same run stays quiet)."""
        if self.progress is None:
            return
        self.progress = None
        self._dirty = True
        self.notify(message, severity=severity, markup=False)

    def redraw(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if self._lines:
            lines, self._lines = self._lines, []
            # benchmark tools draw progress bars: drop colour codes, keep the last state of a \r line,
            # show any other control character as an escape (the Log widget would send it on)
            clean = [visible(ANSI_RE.sub("", line).rsplit("\r", 1)[-1], tab=" ") for line in lines]
            self.query_one("#bench-output", Log).write_lines(clean)
        if self._dirty:
            self._dirty = False
            self.query_one("#bench-status", Static).update(
                progress_text(self.progress, self.kind, self.running_profile)
            )

    @on(ResultReady)
    def _result_ready(self, event: ResultReady) -> None:
        r = event.result
        if self.ctx.journal is not None:
            self.reload()
        else:
            self.entries.append(HistoryEntry(id=len(self.entries) + 1, ts=r.finished_at or 0.0, result=r))
            self._render_table()
        table = self.query_one("#bench-table", DataTable)
        table.move_cursor(row=table.row_count - 1)
        if not r.usable():
            self.notify(
                f"{r.profile}: benchmark FAILED: {r.failure_reason or r.status} (recorded, not a result)",
                severity="error",
                timeout=10,
                markup=False,
            )
            return
        sev: SeverityLevel = "information" if r.status == "done" and not r.warnings else "warning"
        self.notify(
            f"{r.profile}: {headline_text(r)}"
            + (f"\nwarnings: {'; '.join(r.warnings)}" if r.warnings else ""),
            severity=sev,
            timeout=10 if r.warnings else 5,
            markup=False,
        )

    def action_cancel(self) -> None:
        if self.progress is None:
            self.notify("no benchmark running")
            return
        self.workers.cancel_group(self, "bench-run")

    def action_toggle_kind(self) -> None:
        self.kind = "external" if self.kind == "builtin" else "builtin"
        self._dirty = True

    # ---- baseline and compare ----------------------------------------------------------------------
    def action_baseline(self) -> None:
        e = self._highlighted()
        if e is None or self._refuse_failed(e):
            return
        self.baseline_ts = e.ts
        if self.ctx.journal is not None:
            self.ctx.journal.append(baseline_event(e.ts, include_failed=self.include_failed))
        self._render_table()
        self.notify(f"baseline: #{e.id} {e.result.profile or ''}", markup=False)

    def action_compare(self) -> None:
        """First press picks run A; a press on another run compares; on the same run: vs baseline."""
        e = self._highlighted()
        if e is None or self._refuse_failed(e):
            return
        if self.picked is None:
            self.picked = e
            self.notify(
                f"picked #{e.id}: move to another run and press c (same run: vs baseline)", markup=False
            )
            return
        a, b = self.picked, e
        self.picked = None
        base = self._baseline()
        if a is b:
            if base is None or base is e:
                self.notify("pick a different run, or set another baseline")
                return
            a = base
        if self._refuse_failed(a, b):
            return
        self.show_compare(*compare_order(a, b, base))

    def show_compare(self, a: HistoryEntry, b: HistoryEntry) -> None:
        self.compared = (a.id, b.id)
        panel = self.query_one("#bench-compare", Static)
        panel.update(compare_renderable(a, b))
        panel.add_class("-shown")

    def action_spec(self) -> None:
        """The highlighted run's speculation arithmetic (widgets.spec_panel.spec_renderable), in the compare panel."""
        e = self._highlighted()
        if e is not None:
            base = self._baseline()
            panel = self.query_one("#bench-compare", Static)
            panel.update(spec_renderable(self.entries, base, e))
            panel.add_class("-shown")

    def action_close_compare(self) -> None:
        self.picked = None
        self.query_one("#bench-compare", Static).remove_class("-shown")

    def action_reload(self) -> None:
        self.reload()

    def action_report(self) -> None:
        """The session's markdown report, as `specdebug report` (failed runs as the `f` toggle says)."""
        journal = self.ctx.journal
        if journal is None:
            self.notify("no session journal here: nothing to report", severity="warning")
            return
        self.run_worker(
            open_report(self.app, journal, str(journal.label), include_failed=self.include_failed),
            group="bench-report",
            exclusive=True,
        )

    def action_toggle_failed(self) -> None:
        self.include_failed = not self.include_failed
        self.reload()
        self.notify(
            "failed runs may now be a baseline or compared"
            if self.include_failed
            else "failed runs are left out of baselines and comparisons"
        )

    def journal_changed(self, events: list[JournalRecord]) -> None:
        """Another instance wrote to the shared (box) journal."""
        self.reload()

    def action_bisect_end(self, side: str) -> None:
        """This row's profile becomes the bisection's good or bad end (told to the app's store;
        the Bisect pane follows it)."""
        e = self._highlighted()
        if e is not None:
            self.post_message(self.EndPicked(side, e.result.profile))
