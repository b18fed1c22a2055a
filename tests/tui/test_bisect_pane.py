"""Bisect pane: the view folds engine events; ends picked with g/b here and from the Bench history;
read-only turns every key off; snapshots of a running and a finished bisection."""

from __future__ import annotations

from pathlib import Path

from textual import events
from textual.widgets import DataTable

from specdebug.core.bench.models import BenchResult
from specdebug.core.bisect import models as bm
from specdebug.core.records import BisectStartRecord
from specdebug.errors import SpecdebugError
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.bench import BenchPane
from specdebug.tui.panes.bisect import BisectPane, BisectView, profile_for
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import until_slept

KNOBS = [
    bm.KnobRow(
        name="--speculative-num-steps", kind="flag", good="2", bad="3", unit="--speculative-num-steps"
    ),
    bm.KnobRow(name="--disable-cuda-graph", kind="flag", good=None, bad="(set)", unit="--disable-cuda-graph"),
    bm.KnobRow(name="NCCL_PROTO", kind="env", good="LL", bad=None, unit="NCCL_PROTO"),
]
EVIDENCE = bm.Evidence(
    metric="output_tok_s",
    higher_is_better=True,
    good_samples=[93.8],
    bad_samples=[59.8],
    good_mean=93.8,
    bad_mean=59.8,
    threshold=76.8,
    distinguishable=True,
    why="ends differ by 36.2% (93.80 vs 59.80); noise unknown with one run each, --min-gap 5%",
)


def row(index, role, applied, fp, metric, judged, **kw) -> bm.TrialRow:
    return bm.TrialRow(
        index=index,
        role=role,
        config="c",
        applied=applied,
        fingerprint=fp,
        metric=metric,
        samples=[metric] if metric is not None else [],
        judged=judged,
        **kw,
    )


def running_events() -> list:
    return [
        bm.Planned(
            bisect="b1",
            knobs=KNOBS,
            units=[],
            naive_launches=5,
            settings="requests=2",
            good="good",
            bad="bad",
        ),
        bm.TrialDone(row=row(0, bm.Role.GOOD, [], "aaaaaaaaaaaa", 93.8, bm.Judged.GOOD)),
        bm.TrialDone(row=row(1, bm.Role.BAD, [], "bbbbbbbbbbbb", 59.8, bm.Judged.BAD)),
        bm.EndsJudged(evidence=EVIDENCE),
        bm.TrialDone(
            row=row(
                2,
                bm.Role.CANDIDATE,
                ["--speculative-num-steps", "--disable-cuda-graph"],
                "cccccccccccc",
                61.2,
                bm.Judged.BAD,
            )
        ),
        bm.KnobStates(
            stage="binary",
            states={
                "--speculative-num-steps": "suspect",
                "--disable-cuda-graph": "suspect",
                "NCCL_PROTO": "cleared",
            },
        ),
        bm.Estimate(launches_left=2, seconds_left=40.0, launches_max=9),
        bm.TrialStarted(
            index=3,
            role=bm.Role.CANDIDATE,
            config="c",
            applied=["--speculative-num-steps"],
            fingerprint="dddd",
            sample=1,
        ),
        bm.TrialProgress(index=3, phase=bm.Phase.BENCH, detail="1/2 requests", fraction=0.5, elapsed_s=12.5),
    ]


def finished_events() -> list:
    trials = [
        row(0, bm.Role.GOOD, [], "aaaaaaaaaaaa", 93.8, bm.Judged.GOOD),
        row(1, bm.Role.BAD, [], "bbbbbbbbbbbb", 59.8, bm.Judged.BAD),
        row(
            2,
            bm.Role.CANDIDATE,
            ["--speculative-num-steps", "--disable-cuda-graph"],
            "cccccccccccc",
            61.2,
            bm.Judged.BAD,
        ),
        row(3, bm.Role.CANDIDATE, ["--speculative-num-steps"], "dddddddddddd", 92.9, bm.Judged.GOOD),
        row(
            4,
            bm.Role.CANDIDATE,
            ["--disable-cuda-graph"],
            "eeeeeeeeeeee",
            None,
            bm.Judged.BAD,
            gated=True,
            gate_value=21.6,
        ),
    ]
    result = bm.Result(
        verdict="found",
        culprits=["--disable-cuda-graph"],
        knobs=KNOBS,
        trials=trials,
        launches=5,
        naive_launches=7,
        confirmed=True,
        explained=0.97,
        effects={"--disable-cuda-graph": bm.Effect(share=0.97, low=0.9, high=1.04, basis="alone", runs=1)},
    )
    states = {
        "--speculative-num-steps": "cleared",
        "--disable-cuda-graph": "culprit",
        "NCCL_PROTO": "cleared",
    }
    return [*running_events()[:4], bm.KnobStates(stage="done", states=states), bm.Finished(result=result)]


def make_app(tmp_path: Path, *, readonly: bool = False, panes=None) -> SpecdebugApp:
    folder = tmp_path / "profiles"
    folder.mkdir(exist_ok=True)
    for name in ("fast", "slow"):
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\n[server]\nargv = ["python3", "--port", "31000"]\n'
        )
    ctx = AppContext(
        remotes={"gpubox": StillRemote("gpubox")},
        selected="gpubox",
        readonly=readonly,
        profile_choices=sorted(folder.glob("*.toml")),
    )
    return SpecdebugApp(ctx, panes=panes or [BisectPane])


def test_view_folds_events_into_tables_and_result() -> None:
    view = BisectView()
    for ev in running_events():
        view.apply(ev)
    assert view.running is not None and view.progress.fraction == 0.5
    assert view.states["NCCL_PROTO"] == "cleared" and len(view.trials) == 3
    for ev in finished_events()[4:]:
        view.apply(ev)
    assert view.result.culprits == ["--disable-cuda-graph"] and view.running is None and len(view.trials) == 5


def test_bisect_pane_running_snapshot(snap_compare, tmp_path: Path) -> None:
    async def feed(pilot):
        pane = pilot.app.query_one(BisectPane)
        pane.good, pane.bad = pane.choices()[0], pane.choices()[1]
        pane.show_events(running_events())
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), run_before=feed, terminal_size=(150, 30))


def test_bisect_pane_finished_snapshot(snap_compare, tmp_path: Path) -> None:
    async def feed(pilot):
        pane = pilot.app.query_one(BisectPane)
        pane.good, pane.bad = pane.choices()[0], pane.choices()[1]
        pane.show_events(finished_events())
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), run_before=feed, terminal_size=(150, 30))


async def test_ends_picked_with_g_and_b_then_a_without_ends_explains(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        app.query_one("#bisect-ends", DataTable).focus()
        await pilot.press("g", "down", "b")
        assert pane.good.stem == "fast" and pane.bad.stem == "slow"
        table = app.query_one("#bisect-ends", DataTable)
        assert (
            str(table.get_row(str(pane.good))[0]) == "GOOD" and str(table.get_row(str(pane.bad))[0]) == "BAD"
        )
        await pilot.press("s")  # nothing waits for a judgement: a note, no crash
        assert pane.engine is None


async def test_readonly_turns_every_bisect_key_off(tmp_path: Path) -> None:
    app = make_app(tmp_path, readonly=True)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        app.query_one("#bisect-ends", DataTable).focus()
        await pilot.press("g", "down", "b", "a", "h", "j", "r")
        assert pane.good is None and pane.bad is None and pane.engine is None and not pane.hand
        assert pane.metric is None and pane.repeats is None
        for action in (
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
        ):
            assert pane.check_action(action, ()) is False


async def test_bench_history_row_picks_an_end(tmp_path: Path) -> None:
    app = make_app(tmp_path, panes=[BenchPane, BisectPane])
    async with app.run_test(size=(150, 30)) as pilot:
        bench = app.query_one(BenchPane)
        bench.show_results(
            [BenchResult(profile="slow", output_tok_s=60.0), BenchResult(profile="fast", output_tok_s=94.0)]
        )
        app.query_one("#bench-table", DataTable).focus()
        await pilot.press("B", "down", "g")
        pane = app.query_one(BisectPane)
        assert pane.bad.stem == "slow" and pane.good.stem == "fast"


def test_profile_for_accepts_a_loader_prefix(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text('name = "eagle"\n[server]\nargv = ["python3", "--port", "1"]\n')
    choices = [tmp_path / "x.toml"]
    assert profile_for("eagle", choices) == choices[0]
    assert profile_for("demo-eagle", choices) == choices[0]
    assert profile_for("other", choices) is None


async def test_j_picks_the_metric_the_bisection_judges_by(tmp_path: Path, monkeypatch) -> None:
    """The TUI judged by the client's tok/s only; `specdebug bisect --metric` could pick any.  On a
    loaded machine that client's own stalls moved its tok/s by 20 % (a harmless knob was named)."""
    asked: list[bm.BisectOptions] = []

    def no_bisection(remote, good, bad, options, **kw):
        asked.append(options)
        raise SpecdebugError("not started in this test")  # the root: the pane lets the app say it

    monkeypatch.setattr("specdebug.tui.panes.bisect.Bisection", no_bisection)
    app = make_app(tmp_path)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        app.query_one("#bisect-ends", DataTable).focus()
        status = app.query_one("#bisect-status")
        assert "judged by output_tok_s" in str(status.render()) and "j the metric" in str(status.render())
        await pilot.press("g", "down", "b", "j")
        assert "judged by gen_throughput" in str(status.render())
        await pilot.press("a")
        assert [o.metric for o in asked] == ["gen_throughput"]
        for _ in range(5):  # around the list and back to the client's tok/s
            await pilot.press("j")
        assert pane.judged_by() == "output_tok_s"


async def test_reopening_offers_the_unfinished_bisection(tmp_path: Path) -> None:
    from specdebug.core.journal import Journal

    app = make_app(tmp_path)
    fast, slow = app.ctx.profile_choices
    journal = Journal(tmp_path / "session")
    journal.append(
        BisectStartRecord(
            bisect="b1",
            good={"file": str(fast)},
            bad={"file": str(slow)},
            options=bm.BisectOptions(metric="gen_throughput"),
        )
    )
    app.ctx.journal = journal
    async with app.run_test(size=(150, 30)):
        pane = app.query_one(BisectPane)
        assert pane.good == fast and pane.bad == slow
        assert pane.judged_by() == "gen_throughput"  # resumed as it was judged
        assert "unfinished bisection" in str(app.query_one("#bisect-status").render())


async def test_at_80x24_the_tables_keep_their_verdict_columns(tmp_path: Path) -> None:
    """A small terminal cuts the right-hand columns: the knob state and the trial's judgement come first."""
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = pilot.app.query_one(BisectPane)
        pane.good, pane.bad = pane.choices()[0], pane.choices()[1]
        pane.show_events(finished_events())
        await pilot.pause()
        for table_id, key in (("#bisect-trials", "judged"), ("#bisect-knobs", "state")):
            table = pane.query_one(table_id)
            region = table.region
            x = sum(
                c.get_render_width(table)
                for c in list(table.columns.values())[: table.get_column_index(key) + 1]
            )
            assert x <= region.width, f"{table_id}: {key} ends at {x} of {region.width} columns"


async def test_down_then_g_typed_at_once_marks_the_row_moved_to(tmp_path: Path) -> None:
    """Keys as a fast typist's terminal sends them (both queued before either is handled): `g` acts on
    the row the arrow moved to, never on the one the arrow left (a pane key waits its turn)."""
    app = make_app(tmp_path)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        table = app.query_one("#bisect-ends", DataTable)
        table.focus()
        await pilot.pause()
        for _ in range(20):  # each round starts on the first row: down, then g, with no pause between
            table.move_cursor(row=0, animate=False)
            app.post_message(events.Key("down", None))
            app.post_message(events.Key("g", "g"))
            # under load the app may need a while: wait for the mark, not a time
            await until_slept(lambda: pane.good is not None, 30)
            assert pane.good is not None and pane.good.stem == "slow", pane.good
            pane.good = None


async def test_bench_rows_picked_as_ends_with_keys_typed_at_once(tmp_path: Path) -> None:
    """B, Down, g queued together on the Bench history: each end is the row under the cursor when
    its key comes (B: the first run, g: the one Down moved to)."""
    app = make_app(tmp_path, panes=[BenchPane, BisectPane])
    async with app.run_test(size=(150, 30)) as pilot:
        bench = app.query_one(BenchPane)
        bench.show_results(
            [BenchResult(profile="slow", output_tok_s=60.0), BenchResult(profile="fast", output_tok_s=94.0)]
        )
        app.query_one("#bench-table", DataTable).focus()
        await pilot.pause()
        for name, char in (("B", "B"), ("down", None), ("g", "g")):
            app.post_message(events.Key(name, char))
        pane = app.query_one(BisectPane)
        # under load the app may need a while: wait for both ends, not a time
        await until_slept(lambda: pane.good is not None and pane.bad is not None, 30)
        assert pane.bad is not None and pane.bad.stem == "slow"
        assert pane.good is not None and pane.good.stem == "fast"


async def test_r_picks_the_repeats_and_a_replayed_result_says_so(tmp_path: Path, monkeypatch) -> None:
    """Issue 39: the pane could not set repeats (a pair 6 standard errors apart ended cannot-tell
    there while the CLI found it), and reopening it replayed the old result at 0 launches without
    saying so.  `r` picks the repeats as `--repeats`; a result with no launch says it is replayed."""
    asked: list[bm.BisectOptions] = []

    def no_bisection(remote, good, bad, options, **kw):
        asked.append(options)
        raise SpecdebugError("not started in this test")  # the root: the pane lets the app say it

    monkeypatch.setattr("specdebug.tui.panes.bisect.Bisection", no_bisection)
    app = make_app(tmp_path)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        app.query_one("#bisect-ends", DataTable).focus()
        status = app.query_one("#bisect-status")
        assert "repeats 4" in str(status.render())  # the CLI's default
        await pilot.press("g", "down", "b", "r", "r")
        assert pane.repeats == 8 and "repeats 8" in str(status.render())
        await pilot.press("a")
        assert [o.repeats for o in asked] == [8]
        replayed = finished_events()
        result = replayed[-1].result.model_copy(
            update={
                "launches": 0,
                "trials": [t.model_copy(update={"cached": True}) for t in replayed[-1].result.trials],
            }
        )
        pane.show_events([*replayed[:-1], bm.Finished(result=result)])
        assert "REPLAYED" in str(status.render()) and "no launch" in str(status.render())
        pane.show_events(finished_events())  # launched: not a replay
        assert "REPLAYED" not in str(status.render())
