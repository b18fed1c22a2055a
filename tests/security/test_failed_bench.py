"""Failed work is not a result.

A benchmark where more than 5 % of the requests failed exits 1, is journaled as failed with the
reason, and is never a baseline or a side of a comparison (history --compare/--baseline, report,
the bench pane) unless the user asks (--include-failed, the pane's f).  Unit tests for the rule
and the history/report logic; the pane through Pilot; the whole path over the real sshd against
a sim that fails most requests (`--fail-requests 0.8`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.core.bench.models import BenchConfig, BenchResult, judge_failures
from specdebug.core.journal import Journal
from specdebug.core.records import BenchResultRecord, JournalRecord, parse_record
from specdebug.core.report import baseline_event, baseline_of, history, render_markdown
from specdebug.sim.box import local as sim_local
from specdebug.sim.server.common.faults import RequestFaults
from tests.security.boxkit import run, write_profile

# -- unit ------------------------------------------------------------------------------------------


def result(ok: int, bad: int, tok: float = 90.0, **kw) -> BenchResult:
    return BenchResult(
        profile=kw.pop("profile", "p"),
        successful_requests=ok,
        failed_requests=bad,
        decode_tok_s=tok,
        config=BenchConfig(concurrency=1),
        errors=["HTTP 500: boom"] if bad else [],
        **kw,
    )


def test_more_than_five_percent_failed_is_a_failed_run() -> None:
    assert judge_failures(result(38, 2)).status == "done"  # exactly 5 %: still a result
    r = judge_failures(result(37, 3))
    assert r.status == "failed" and not r.usable()
    assert r.failure_reason == "3 of 40 requests failed (8 %, more than 5 %): HTTP 500: boom"
    r = judge_failures(result(8, 32))
    assert r.failure_reason.startswith("32 of 40 requests failed (80 %")
    none_ok = judge_failures(result(0, 4))
    assert none_ok.status == "failed" and none_ok.failure_reason
    external = judge_failures(BenchResult(kind="parsed", output_tok_s=10.0))  # no counts: nothing to judge
    assert external.status == "done" and external.failure_reason is None
    already = judge_failures(BenchResult(status="failed", errors=["no result block in the output (exit 2)"]))
    assert already.failure_reason == "no result block in the output (exit 2)"


def test_sim_fails_the_asked_share_of_requests() -> None:
    faults = RequestFaults(0.8)
    fates = [faults.next_fails() for _ in range(100)]
    assert sum(fates) == 80
    assert not any(RequestFaults(0.0).next_fails() for _ in range(10))


def events_of(*results: BenchResult, marks: list[dict] | None = None) -> list[JournalRecord]:
    # as a journal written before the typed records holds them: the event's ts and kind last
    out = [
        {**r.model_dump(mode="json"), "ts": float(i + 1), "kind": "bench_result"}
        for i, r in enumerate(results)
    ]
    return [parse_record(x) for x in out + [{"ts": 100.0, "kind": "mark", **m} for m in marks or []]]


def test_history_and_report_leave_failed_runs_out() -> None:
    # a journal written before the rule: status "done" with 32 of 40 requests failed
    old_failed = result(8, 32, tok=500.0, profile="broken")
    events = events_of(result(40, 0, profile="good-1"), old_failed, result(40, 0, tok=99.0, profile="good-2"))
    entries = history(events)
    assert [e.result.status for e in entries] == ["done", "failed", "done"]
    assert baseline_of(events, entries).id == 1
    # a baseline mark on the failed run is not honoured ... unless it was set with include_failed
    marked = [*events, baseline_event(2.0).model_copy(update={"ts": 100.0})]
    assert baseline_of(marked, history(marked)).id == 1
    assert baseline_of(marked, history(marked), include_failed=True).id == 2
    asked = [*events, baseline_event(2.0, include_failed=True).model_copy(update={"ts": 100.0})]
    assert baseline_of(asked, history(asked)).id == 2
    # the first run failing: the baseline is the first run that did not
    assert baseline_of(events[1:], history(events[1:])).result.profile == "good-2"

    md = render_markdown(events)
    assert "## Failed runs" in md and "#2 broken: 32 of 40 requests failed" in md
    row = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    assert "| failed |" in row
    # the failed run is no side of a config-change comparison
    assert "#1 good-1 -> #3 good-2" in md or "same recorded config" in md
    assert "-> #2" not in md and "#2 broken ->" not in md
    asked_md = render_markdown(events, include_failed=True)  # asked for: a delta like any run
    assert "| +455.6% |" in next(line for line in asked_md.splitlines() if line.startswith("| 2 |"))


async def test_bench_pane_refuses_failed_runs_unless_asked(tmp_path: Path) -> None:
    from specdebug.tui.app import SpecdebugApp
    from specdebug.tui.context import AppContext
    from specdebug.tui.panes.bench import BenchPane
    from tests.tui.fakes import StillRemote

    journal = Journal(tmp_path / "session")
    for r in (
        result(40, 0, profile="good-1"),
        result(8, 32, profile="broken"),
        result(40, 0, profile="good-2"),
    ):
        journal.append(BenchResultRecord(result=judge_failures(r)))
    ctx = AppContext(remotes={"gpubox": StillRemote("gpubox")}, selected="gpubox", journal=journal)
    app = SpecdebugApp(ctx, panes=[BenchPane])
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BenchPane)
        pane.query_one("#bench-table").focus()
        await pilot.pause()
        assert pane._baseline().id == 1
        assert pane._row(pane.entries[1], pane._baseline())[3].plain == "FAILED"
        await pilot.press("down", "=")  # the failed run as baseline: refused
        await pilot.pause()
        assert journal.events({"mark"}) == [] and pane._baseline().id == 1
        await pilot.press("c")  # nor can it be picked for a compare
        assert pane.picked is None
        await pilot.press("f", "=")  # asked for: allowed, and the mark remembers it
        await pilot.pause()
        marks = journal.events({"mark"})
        assert marks and marks[-1].get("include_failed") is True and pane._baseline().id == 2


# -- integration over the real sshd -----------------------------------------------------------------


@pytest.mark.slow
def test_failed_benchmark_exits_1_and_is_no_baseline(sshd, tmp_path: Path) -> None:
    session = tmp_path / "session"
    sims, profiles = [], {}
    try:
        for name, extra in (("good", []), ("broken", ["--fail-requests", "0.8"])):
            log = tmp_path / f"{name}.log"
            sim = sim_local.start_local_sim(["--model-path", "m", *extra], log_file=log, time_scale=0.02)
            sims.append(sim)
            sim.wait_ready(90)
            profiles[name] = write_profile(
                tmp_path / f"{name}.toml",
                name,
                {"argv": ["sim"], "port": sim.port, "log_file": str(log)},
                bench={"requests": 10, "output_len": 8, "input_len": 8},
            )
        good = run(sshd, "bench", "gpubox", "-c", str(profiles["good"]), "--session", str(session))
        assert good.returncode == 0, good.stderr
        bad = run(sshd, "bench", "gpubox", "-c", str(profiles["broken"]), "--session", str(session))
        assert bad.returncode == 1, bad.stdout
        text = bad.stdout.decode()
        assert "benchmark FAILED: " in text and "of 10 requests failed" in text, text
        again = run(sshd, "bench", "gpubox", "-c", str(profiles["good"]), "--session", str(session), "--json")
        assert again.returncode == 0, again.stderr

        recorded = [e for e in Journal(session).events({"bench_result"})]
        assert [e["status"] for e in recorded] == ["done", "failed", "done"]
        assert recorded[1]["failed_requests"] >= 7 and "requests failed" in recorded[1]["failure_reason"]

        listing = run(sshd, "history", "--session", str(session), "--json")
        data = json.loads(listing.stdout)
        assert data["baseline"] == 1 and data["results"][1]["status"] == "failed"
        shown = run(sshd, "history", "--session", str(session)).stdout.decode()
        assert "FAILED" in shown and "requests failed" in shown

        refused = run(sshd, "history", "--session", str(session), "--compare", "1", "2")
        assert refused.returncode == 2 and b"--include-failed" in refused.stderr
        assert run(sshd, "history", "--session", str(session), "--baseline", "2").returncode == 2
        assert run(sshd, "history", "--session", str(session), "--compare", "1", "3").returncode == 0
        asked = run(
            sshd, "history", "--session", str(session), "--compare", "1", "2", "--include-failed", "--json"
        )
        assert asked.returncode == 0 and json.loads(asked.stdout)["b"] == 2

        report = run(sshd, "report", "--session", str(session)).stdout.decode()
        assert "## Failed runs" in report and "#2 broken" in report
    finally:
        for sim in sims:
            sim.stop()
