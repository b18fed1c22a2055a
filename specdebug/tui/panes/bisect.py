"""Bisect pane: pick a good and a bad end, then find the knob(s) that make the bad one slower.

The engine is `specdebug.core.bisect.run.Bisection`, the same as `specdebug bisect`; this pane folds
its events into tables (knobs: suspect / cleared / culprit / unresolved; trials: knobs applied, fingerprint,
metric, judged, cached, gated), shows the running trial's phase with progress and an estimate of
launches and time left, and sends the user's keys back as engine controls (pause after this trial,
a judgement by hand, measure again, abort).  Ends are picked with g/b on a profile here, or on a
row of the Bench history; `j` picks the metric before the start, as `specdebug bisect --metric` (the
server's own gen_throughput does not move with the load of the machine running the client).  Every
key that can change the box is off in --readonly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from specdebug.core.bisect import models as bm
from specdebug.core.bisect.book import unfinished
from specdebug.core.bisect.judge import METRIC_CHOICES
from specdebug.core.bisect.run import Bisection
from specdebug.core.bisect.trial import Nodes
from specdebug.core.deployment import Deployment, place
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile, load_profile
from specdebug.core.target import Target
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.panes.bisect_view import BisectView, profile_for, progress_bar, short
from specdebug.tui.widgets.measured_table import MeasuredTable
from specdebug.tui.widgets.steady import Steady

STATE_STYLE = {"suspect": "yellow", "cleared": "dim", "culprit": "bold red", "unresolved": "magenta"}
JUDGED_STYLE = {"good": "green", "bad": "bold red", "skip": "magenta", "unclear": "yellow"}
FLUSH_S = 0.1
APPLIED_WIDTH = 40  # the trial table's "knobs applied" cell; the knob table has the full names


def target_bisection(
    target: Target,
    bad: Profile,
    options: bm.BisectOptions,
    *,
    journal: EventJournal | None,
    remeasure: set[str] | None,
    ssh_config: str | None,
) -> Bisection:
    """The bisection of the target's profile (the good end) against `bad`, as the `bisect` verb
    starts it: on a deployment every trial is placed on the good end's nodes, launched, waited for
    and stopped on all of them (the leader serves the benchmark)."""

    def placer(profile: Profile) -> Deployment:
        return place(profile, ssh_config=ssh_config)

    nodes = Nodes(remotes=target.remotes, place=placer) if target.multi else None
    return Bisection(
        target.leader_remote, target.profile, bad, options, journal=journal, remeasure=remeasure, nodes=nodes
    )


class BisectPane(Pane):
    PANE_ID = "bisect"
    TITLE = "Bisect"
    BINDINGS = [
        Binding("a", "start", "Start (auto)", id="bisect.start"),
        Binding("g", "good", "Good", id="bisect.good"),
        Binding("b", "bad", "Bad", id="bisect.bad"),
        Binding("s", "skip", "Skip", id="bisect.skip"),
        Binding("p", "pause", "Pause", id="bisect.pause"),
        Binding("m", "measure_again", "Again", id="bisect.measure_again"),
        Binding("x", "abort", "Abort", id="bisect.abort"),
        Binding("h", "toggle_hand", "By hand", id="bisect.hand"),
        Binding("j", "next_metric", "Metric", id="bisect.metric"),
        Binding("r", "next_repeats", "Repeats", id="bisect.repeats"),
    ]
    MUTATING_ACTIONS = frozenset(
        {
            "start",
            "good",
            "bad",
            "skip",
            "pause",
            "measure_again",
            "abort",
            "toggle_hand",
            "next_metric",
            "next_repeats",
        }
    )
    REPEATS = (2, 3, 4, 6, 8)  # `r` cycles through these, as `specdebug bisect --repeats R`
    IN_TURN_ACTIONS = frozenset({"good", "bad"})  # the highlighted profile becomes an end
    DEFAULT_CSS = """
    BisectPane { layout: vertical; }
    BisectPane #bisect-status { height: auto; padding: 0 1; }
    BisectPane #bisect-main { height: 1fr; }
    BisectPane #bisect-side { width: 56; }
    BisectPane #bisect-ends { height: auto; max-height: 10; }
    BisectPane #bisect-knobs { height: 1fr; }
    BisectPane #bisect-trials { width: 1fr; }
    BisectPane.-narrow #bisect-side { width: 44; }
    """

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(ctx, **kwargs)
        self.view = BisectView()
        self.good: Path | None = None
        self.bad: Path | None = None
        self.hand = False
        self.engine: Bisection | None = None
        self.note: str | None = None  # one line of news under the status
        self.bench: dict[str, Any] = {}  # bench settings for the trials (default: the good profile's [bench])
        self.metric: str | None = None  # `j`'s choice; None: the preset's, else output_tok_s
        self.repeats: int | None = None  # `r`'s choice; None: the preset's, else the CLI's default
        self.bench_note = ""  # the trials' bench settings beside the Bench pane's (the profile's [bench])
        self._dirty = True

    def compose(self) -> ComposeResult:
        yield Steady(id="bisect-status")
        with Horizontal(id="bisect-main"):
            with Vertical(id="bisect-side"):
                ends: DataTable[Any] = MeasuredTable(id="bisect-ends", cursor_type="row")
                ends.add_column("end", key="end")
                ends.add_column("profile", key="profile")
                yield ends
                knobs: DataTable[Any] = MeasuredTable(
                    id="bisect-knobs", cursor_type="row", zebra_stripes=True
                )
                # the verdict columns first: at 80x24 the right-hand columns are cut off
                for label, key in (("knob", "knob"), ("state", "state"), ("good", "good"), ("bad", "bad")):
                    knobs.add_column(label, key=key)
                yield knobs
            trials: DataTable[Any] = MeasuredTable(id="bisect-trials", cursor_type="row", zebra_stripes=True)
            for label, key in (
                ("#", "index"),
                ("judged", "judged"),
                ("metric", "metric"),
                ("knobs applied", "applied"),
                ("fingerprint", "fp"),
                ("cached", "cached"),
                ("gated", "gated"),
            ):
                trials.add_column(label, key=key)
            yield trials

    def on_mount(self) -> None:
        preset = self.ctx.bisect_preset  # the demo offers the story's bisection
        if preset is not None and self.good is None and self.bad is None:
            self.good, self.bad = preset.good, preset.bad
            self.bench = dict(preset.bench)
            self.note = "the story's bisection is ready: a starts it"
        journal = self.ctx.journal
        previous = unfinished(journal.records()) if journal is not None else None
        if previous is not None:
            good, bad = previous.good.file, previous.bad.file
            if good and bad:
                self.good, self.bad = Path(good), Path(bad)
                self.metric = previous.options.metric  # resumed as it was judged
                self.repeats = previous.options.repeats
                self.note = (
                    "an unfinished bisection is in this session: a resumes it (finished trials are kept)"
                )
        self.render_all()

    # ---- feeding (tests, snapshots) -------------------------------------------------------------
    def show_events(self, events: list[Any]) -> None:
        for ev in events:
            self.view.apply(ev)
        self.render_all()

    def choices(self) -> list[Path]:
        paths = list(self.ctx.profile_choices)
        if self.ctx.profile_path is not None and all(
            p.resolve() != self.ctx.profile_path.resolve() for p in paths
        ):
            paths.insert(0, self.ctx.profile_path)
        return paths

    def end_picked(self, side: str, result_profile: str | None) -> None:
        """Bench history's g/B (through the app's store): that row's profile becomes an end."""
        self.set_end(side, profile_for(result_profile, self.choices()), source=result_profile)

    def end_marker(self) -> BisectPane:
        return self  # the profile picker (P) marks ends here with g/b

    def end_of(self, path: Path) -> str | None:
        here = path.resolve()
        return next(
            (s for s, p in (("bad", self.bad), ("good", self.good)) if p and p.resolve() == here), None
        )

    def set_end(self, side: str, path: Path | None, *, source: str | None = None) -> None:
        if path is None:
            self.notify(f"no profile file for {source or 'that row'} among the profiles", severity="warning")
            return
        if self.end_of(path) not in (None, side):  # one profile is not both ends
            self.good, self.bad = (None, self.bad) if side == "bad" else (self.good, None)
        if side == "good":
            self.good = path
        else:
            self.bad = path
        self.notify(f"bisect {side} end: {path.stem}")
        self.render_all()

    # ---- rendering --------------------------------------------------------------------------------
    def redraw(self) -> None:  # the pane base calls it once per burst of _dirty = True
        self._flush()

    def _flush(self) -> None:
        if self._dirty:
            self._dirty = False
            self.render_all()

    def render_all(self) -> None:
        self.query_one("#bisect-status", Static).update(self._status())
        self._render_ends()
        self._render_knobs()
        self._render_trials()

    def _status(self) -> Text:
        v = self.view
        t = Text()
        t.append("good ", style="bold")
        t.append(self.good.stem if self.good else "(g on a profile)", style="green")
        t.append("   bad ", style="bold")
        t.append(self.bad.stem if self.bad else "(b on a profile)", style="red")
        if self.hand:
            t.append("   judging by hand", style="bold magenta")
        else:
            t.append("   judged by ", style="bold")
            t.append(self.judged_by())  # the hint line below says `j` picks another
        t.append("   repeats ", style="bold")
        t.append(str(self.repeats_used()))
        t.append("\n")
        if v.result is not None:
            r = v.result
            if r.launches == 0 and r.trials and all(tr.cached for tr in r.trials):
                t.append("REPLAYED ", style="bold magenta")
                t.append(
                    "from this session's journal, no launch (m on a row measures it again)  ", style="dim"
                )
            ok = r.verdict in ("found", "several", "interaction") and r.confirmed
            t.append(f"{r.verdict.upper()}", style="bold green" if ok else "bold yellow")
            if r.culprits:
                shares = [
                    f"{c} {e.share:+.0%}" if (e := r.effects.get(c)) and e.share is not None else c
                    for c in r.culprits
                ]
                t.append(f"  culprit: {', '.join(shares)}", style="bold red")
            if r.explained is not None:
                t.append(f"  explains {r.explained:.0%} of the gap")
            t.append(f"  {r.launches} launches (one knob at a time: {r.naive_launches})")
        elif v.awaiting is not None:
            a = v.awaiting
            metric = f"{a.metric:.2f}" if a.metric is not None else "no metric"
            t.append(
                f"#{a.index} measured {metric}: your judgement: g good · b bad · s skip", style="bold yellow"
            )
        elif v.paused:
            t.append("paused after the trial: a goes on", style="bold yellow")
        elif v.running is not None:
            run = v.running
            what = run.role.value if run.role is not bm.Role.CANDIDATE else "+" + " +".join(run.applied)
            t.append(f"#{run.index} {what}  ", style="bold")
            if v.progress is not None:
                p = v.progress
                t.append(f"{p.phase.value} ")
                t.append(progress_bar(p.fraction), style="cyan")
                t.append(f" {p.detail}  {p.elapsed_s:.1f}s", style="dim")
        elif v.planned is None:
            t.append(
                "a starts the bisection · g/b pick the ends · h judges by hand · j the metric · r the repeats",
                style="dim",
            )
        if v.estimate is not None and v.result is None:
            t.append(f"   {v.estimate.text()}", style="dim")
        if self.bench_note:
            t.append("\n" + self.bench_note, style="dim")
        if v.evidence is not None:
            t.append("\n")
            t.append(v.evidence.why, style="dim")
        if self.note:
            t.append("\n")
            t.append(self.note, style="italic")
        return t

    def _render_ends(self) -> None:
        table = self.query_one("#bisect-ends", DataTable)
        row = table.cursor_row
        table.clear()
        good, bad = (p.resolve() if p else None for p in (self.good, self.bad))
        for path in self.choices():
            here = path.resolve()
            mark = Text("GOOD", style="bold green") if here == good else Text("")
            if here == bad:
                mark = Text("BAD", style="bold red")
            table.add_row(mark, Text(path.stem), key=str(path))
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1), animate=False)

    def _render_knobs(self) -> None:
        table = self.query_one("#bisect-knobs", DataTable)
        table.clear()
        if self.view.planned is None:
            return
        for k in self.view.planned.knobs:
            state = self.view.states.get(k.name, "suspect")
            table.add_row(
                Text(k.name),
                Text(state, style=STATE_STYLE.get(state, "")),
                Text("(absent)" if k.good is None else k.good, style="dim" if k.good is None else ""),
                Text("(absent)" if k.bad is None else k.bad, style="dim" if k.bad is None else ""),
                key=k.name,
            )

    def _render_trials(self) -> None:
        table = self.query_one("#bisect-trials", DataTable)
        row = table.cursor_row
        table.clear()
        for i in sorted(self.view.trials):
            t = self.view.trials[i]
            applied = t.role.value + " end" if t.role in (bm.Role.GOOD, bm.Role.BAD) else ", ".join(t.applied)
            metric = (
                "-"
                if t.metric is None
                else f"{t.metric:.2f}" + (f" ×{len(t.samples)}" if len(t.samples) > 1 else "")
            )
            judged = t.judged.value if t.judged else "…"
            table.add_row(
                str(t.index),
                Text(judged, style=JUDGED_STYLE.get(judged, "")),
                metric,
                Text(short(applied, APPLIED_WIDTH)),
                Text(t.fingerprint[:10], style="dim"),
                "yes" if t.cached else "",
                Text(f"{t.gate_value:.1f}" if t.gated and t.gate_value else ("yes" if t.gated else "")),
                key=t.fingerprint,
            )
        if table.row_count:
            table.move_cursor(row=min(max(row, 0), table.row_count - 1), animate=False)

    # ---- actions --------------------------------------------------------------------------------
    def _highlighted(self, table_id: str) -> str | None:
        table = self.query_one(table_id, DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def _judge_or_pick(self, verdict: bm.Judged, side: str | None) -> None:
        if self.engine is not None and self.engine.awaiting:
            self.engine.judge(verdict)
            self.view.awaiting = None
            self._dirty = True
            return
        if side is None:
            self.notify("nothing waits for a judgement (h makes every candidate wait for one)")
            return
        key = self._highlighted("#bisect-ends")
        self.set_end(side, Path(key) if key else None)

    def action_good(self) -> None:
        self._judge_or_pick(bm.Judged.GOOD, "good")

    def action_bad(self) -> None:
        self._judge_or_pick(bm.Judged.BAD, "bad")

    def action_skip(self) -> None:
        self._judge_or_pick(bm.Judged.SKIP, None)

    def action_toggle_hand(self) -> None:
        if self.engine is not None:
            self.notify("judging mode is chosen before the start", severity="warning")
            return
        self.hand = not self.hand
        self.render_all()

    def judged_by(self) -> str:
        """The metric the next (or running) bisection judges by."""
        return self.metric or str(self.bench.get("metric") or METRIC_CHOICES[0][0])

    def repeats_used(self) -> int:
        """Measurements of one config at most while a decision is within the noise (--repeats)."""
        preset = self.bench.get("repeats")
        return self.repeats or (int(preset) if preset else bm.BisectOptions().repeats)

    def action_next_repeats(self) -> None:
        if self.engine is not None:
            self.notify("the repeats are chosen before the start", severity="warning")
            return
        now = self.repeats_used()
        self.repeats = next((r for r in self.REPEATS if r > now), self.REPEATS[0])
        self.notify(f"up to {self.repeats} measurements of a config while within the noise")
        self.render_all()

    def action_next_metric(self) -> None:
        if self.engine is not None:
            self.notify("the metric is chosen before the start", severity="warning")
            return
        names = [m for m, _ in METRIC_CHOICES]
        now = self.judged_by()
        self.metric = names[(names.index(now) + 1) % len(names)] if now in names else names[0]
        self.notify(f"judged by {self.metric}: {dict(METRIC_CHOICES)[self.metric]}")
        self.render_all()

    def action_start(self, remeasure: set[str] | None = None) -> None:
        if self.engine is not None and self.view.paused:
            self.engine.pause(False)
            return
        if self.engine is not None:
            self.notify("a bisection is running (p pauses, x aborts)", severity="warning")
            return
        if self.good is None or self.bad is None:
            self.notify("pick both ends first: g on the good profile, b on the bad one", severity="error")
            return
        loader = self.ctx.profile_loader or load_profile
        # a profile that does not load, a bad --group or gate: the app's one handler says it (pane.py)
        good, bad = loader(self.good), loader(self.bad)
        target = self.acting_target(good)  # where the trials run: the selected host, or good's nodes
        if target is None:
            return
        engine = target_bisection(
            target,
            bad,
            bm.BisectOptions(
                hand=self.hand,
                **{**self.bench, "metric": self.judged_by(), "repeats": self.repeats_used()},
            ),
            journal=self.ctx.journal,
            remeasure=remeasure,
            ssh_config=self.ctx.ssh_config,
        )
        self.engine, self.note = engine, None
        b = good.bench
        pane = f"requests={b.requests},output_len={b.output_len},concurrency={b.concurrency},input_len={b.input_len}"
        mine = engine.settings.key()
        self.bench_note = f"bench per trial: {mine}" + (
            "  (the Bench pane: the same)"
            if mine == pane
            else f"  (the Bench pane uses {pane}: its tok/s differ)"
        )
        self.run_bisection(engine)

    @work(exclusive=True, group="bisect-run", exit_on_error=False, name="bisection")
    async def run_bisection(self, engine: Bisection) -> None:
        """A failed trial or a lost box ends the worker: its error reaches the one handler (pane.py)."""
        launched = self.ctx.launched_profiles  # the demo stops them at exit
        try:
            async for ev in engine.events():
                if isinstance(ev, bm.TrialStarted) and launched is not None and engine.current is not None:
                    launched.append(engine.current)
                self.view.apply(ev)
                self._dirty = True
                if isinstance(ev, bm.Finished):
                    r = ev.result
                    found = f": {', '.join(r.culprits)}" if r.culprits else ""
                    self.notify(
                        f"bisection {r.verdict}{found}", severity="information" if found else "warning"
                    )
        finally:
            self.engine = None
            self._dirty = True

    def action_pause(self) -> None:
        if self.engine is None:
            self.notify("no bisection running")
            return
        on = not self.view.paused
        self.engine.pause(on)
        self.notify("pausing after this trial" if on else "going on")

    def action_measure_again(self) -> None:
        fp = self._highlighted("#bisect-trials")
        if fp is None:
            return
        if self.engine is not None:
            self.engine.measure_again(fp)
            self.notify(f"{fp[:10]} will be measured again before the next trial")
        else:
            self.action_start(remeasure={fp})

    def action_abort(self) -> None:
        if self.engine is None:
            self.notify("no bisection running")
            return
        self.workers.cancel_group(self, "bisect-run")
        self.note = "aborted: the trial's server is being stopped"
        self.view.running = self.view.progress = self.view.awaiting = None
        self._dirty = True
