"""Typed journal records (core.records): journals written before the models read back whole.

Until issue 23 every writer appended `{**data, "ts": ..., "kind": ...}` as a plain dict; a session
folder from then must still give its history, report, trial cache and ETA.  The old lines below are
as those writers wrote them (a launch from before `source`, `step` and `launch_id` existed, a mark
with `source: cli`, a bench result whose own `kind` the envelope overwrote, a kind from a newer
writer); each is read back as its model, and every model writes the same flat line back.
"""

from __future__ import annotations

import json
from pathlib import Path

from specdebug.core.bench.models import BenchConfig, BenchResult
from specdebug.core.bisect import models as bm
from specdebug.core.bisect.book import unfinished
from specdebug.core.control.events import ServerPhase, Verdict
from specdebug.core.control.records import ServerRecord, StopResult
from specdebug.core.control.tracker import startup_history
from specdebug.core.journal import Journal
from specdebug.core.records import (
    BenchResultRecord,
    BisectJudgementRecord,
    BisectLaunchRecord,
    BisectResultRecord,
    BisectStartRecord,
    BisectStopRecord,
    BisectTrialRecord,
    LaunchRecord,
    MarkRecord,
    OtherRecord,
    SpecAdviceTryRecord,
    StopRecord,
    VerdictRecord,
    parse_record,
)
from specdebug.core.report import baseline_of, history, render_markdown
from specdebug.core.source import ServerSource

RESULT = BenchResult(
    profile="base",
    host="gpu-box",
    fingerprint="178b89b24adb",
    successful_requests=8,
    output_tok_s=94.0,
    config=BenchConfig(concurrency=1),
)
OLD_LINES = [
    # a launch as core/control/launch.py wrote it before ServerRecord had source/step/launch_id
    {
        "profile": "base", "host": "gpu-box", "fingerprint": "178b89b24adb", "pid": 4242, "pgid": 4242,
        "start_ticks": 77, "port": 30000, "log_file": "/var/log/sglang.log", "log_offset": 0,
        "started_at": 1_700_000_000.0, "argv": ["python", "-m", "sglang.launch_server"], "env": {},
        "cwd": None, "attached": False, "stopped_at": None, "drift": None, "ts": 1_700_000_000.5,
        "kind": "launch",
    },
    {
        "type": "verdict", "verdict": "ready", "profile": "base", "fingerprint": "178b89b24adb",
        "phases": [{"type": "phase", "name": "load_weights", "at": 1_700_000_004.0, "elapsed_s": 4.0, "line": None}],
        "last_phase": "load_weights", "ready_at": 1_700_000_014.0, "at": 1_700_000_014.0, "elapsed_s": 14.0,
        "reason": None, "error_kind": None, "excerpt": [], "pid": 4242, "pgid": 4242,
        "log_file": "/var/log/sglang.log", "ts": 1_700_000_014.1, "kind": "verdict",
    },
    # the result's own kind ("builtin") was overwritten by the envelope's
    {**RESULT.model_dump(mode="json"), "ts": 1_700_000_100.0, "kind": "bench_result"},
    {"label": "NCCL_PROTO exported", "source": "cli", "ts": 1_700_000_101.0, "kind": "mark"},
    {"label": "baseline", "result_ts": 1_700_000_100.0, "ts": 1_700_000_102.0, "kind": "mark"},
    {"text": "now with 2 steps", "ts": 1_700_000_103.0, "kind": "note"},
    {"bisect": "b1", "good": {"name": "a", "file": "a.toml", "fingerprint": "g"},
     "bad": {"name": "b", "file": "b.toml", "fingerprint": "f"}, "settings": "s",
     "options": {"metric": "output_tok_s"}, "knobs": [], "ts": 1_700_000_200.0, "kind": "bisect_start"},
    {"profile": "a", "pid": 5151, "port": 30001, "bisect": "b1", "ts": 1_700_000_201.0, "kind": "bisect_launch"},
    {**bm.Measurement(bisect="b1", config="a", fingerprint="g", settings="s", role=bm.Role.GOOD,
                      metrics={"output_tok_s": 90.0}).model_dump(mode="json"),
     "ts": 1_700_000_202.0, "kind": "bisect_trial"},
    {"profile": "a", "pid": 5151, "ts": 1_700_000_203.0, "kind": "bisect_stop"},
    {"bisect": "b1", "fingerprint": "g", "settings": "s", "judged": "good", "ts": 1_700_000_204.0,
     "kind": "bisect_judgement"},
    {**StopResult(profile="base", pid=4242, pgid=4242, was_running=True, stopped=True).model_dump(mode="json"),
     "ts": 1_700_000_300.0, "kind": "stop"},
    {"what": "a kind this version does not know", "ts": 1_700_000_301.0, "kind": "deployment_placed"},
]  # fmt: skip


def _old_session(tmp_path: Path) -> Path:
    session = tmp_path / "old"
    session.mkdir()
    lines = [json.dumps(line) for line in OLD_LINES]
    (session / "events.jsonl").write_text("\n".join(lines) + "\n" + '{"kind": "bench_res')  # and a torn tail
    return session


def test_an_old_journal_reads_back_as_typed_records(tmp_path: Path) -> None:
    journal = Journal(_old_session(tmp_path))
    records = journal.records()
    assert journal.skipped == []  # the torn tail is a killed writer's, not said
    assert [type(r) for r in records] == [
        LaunchRecord, VerdictRecord, BenchResultRecord, MarkRecord, MarkRecord, OtherRecord,
        BisectStartRecord, BisectLaunchRecord, BisectTrialRecord, BisectStopRecord,
        BisectJudgementRecord, StopRecord, OtherRecord,
    ]  # fmt: skip
    launch, verdict, bench, cli_mark = records[:4]
    assert isinstance(launch, LaunchRecord) and launch.server.pid == 4242 and launch.server.source is None
    assert launch.host == "gpu-box" and launch.node is None
    assert isinstance(verdict, VerdictRecord) and verdict.outcome.phases[0].name == "load_weights"
    assert isinstance(bench, BenchResultRecord) and bench.result.kind == "builtin" and bench.host == "gpu-box"
    assert isinstance(cli_mark, MarkRecord) and cli_mark.origin == "cli"
    assert records[-1].kind == "deployment_placed" and records[-1].to_json()["what"].startswith("a kind")


def test_an_old_journal_feeds_history_report_resume_and_eta(tmp_path: Path) -> None:
    records = Journal(_old_session(tmp_path)).records()
    entries = history(records)
    assert [e.result.profile for e in entries] == ["base"] and entries[0].result.output_tok_s == 94.0
    assert baseline_of(records, entries) is entries[0]
    md = render_markdown(records, title="old")
    assert "NCCL_PROTO exported (from the command line)" in md and "**note**: text=now with 2 steps" in md
    assert "deployment_placed" in md
    previous = unfinished(records)
    assert previous is not None and previous.bisect == "b1" and previous.good.file == "a.toml"
    eta = startup_history(records, "base")
    assert eta is not None and eta.runs == 1 and eta.expected_total_s == 14.0


def test_every_record_writes_the_flat_line_it_reads_back(tmp_path: Path) -> None:
    server = ServerRecord(profile="base", host="gpu-box", pid=4242, pgid=4242, port=30000, log_file="/l")
    external = RESULT.model_copy(update={"kind": "external", "source_format": "vllm"})
    trial = bm.Measurement(bisect="b1", config="a", fingerprint="g", settings="s", role=bm.Role.GOOD)
    made = [
        LaunchRecord(server=server, drift={"packages": {}}),
        VerdictRecord(outcome=Verdict(verdict="ready", profile="base", phases=[ServerPhase(name="x", at=1, elapsed_s=1)])),
        StopRecord(stop=StopResult(profile="base", stopped=True), host="gpu-box"),
        BenchResultRecord(result=external),
        MarkRecord(label="seen", host="gpu-box", path="/l", offset=3, matches=2, pane="logs", n=1),
        BisectStartRecord(bisect="b1", good={"file": "a.toml"}),
        BisectTrialRecord(trial=trial),
        BisectJudgementRecord(bisect="b1", fingerprint="g", judged=bm.Judged.SKIP),
        BisectResultRecord(result=bm.Result(verdict="found", bisect="b1", culprits=["--x"])),
        BisectLaunchRecord(profile="a", pid=9, bisect="b1", host="gpu-box"),
        BisectStopRecord(profile="a", pid=9),
        OtherRecord(kind="note", text="hello"),
    ]  # fmt: skip
    journal = Journal(tmp_path / "s")
    for record in made:
        journal.append(record)
    lines = [json.loads(x) for x in journal.path.read_text().splitlines()]
    assert "server" not in lines[0] and "outcome" not in lines[1] and "trial" not in lines[6]  # flat
    assert (
        lines[1]["verdict"] == "ready"
        and lines[3]["output_tok_s"] == 94.0
        and lines[8]["culprits"] == ["--x"]
    )
    assert (
        lines[0]["pid"] == 4242
        and lines[3]["kind"] == "bench_result"
        and lines[3]["bench_kind"] == "external"
    )
    back = journal.records()
    assert journal.skipped == []
    for wrote, read in zip(made, back, strict=True):
        assert type(read) is type(wrote)
        assert read.model_dump(exclude={"ts"}) == wrote.model_dump(exclude={"ts"})
    assert back[3].result.kind == "external"  # no longer lost to the envelope's kind
    assert parse_record(lines[0]) == back[0]


def test_a_record_that_does_not_validate_is_skipped_with_its_field(tmp_path: Path) -> None:
    session = tmp_path / "s"
    session.mkdir()
    bad_launch = {**OLD_LINES[0], "pid": "4242x"}
    bad_trial = {**OLD_LINES[8], "role": "referee"}
    lines = [bad_launch, OLD_LINES[2], bad_trial, {"kind": "stop", "ts": 1.0}]
    (session / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    journal = Journal(session)
    assert [r.kind for r in journal.records()] == ["bench_result"]
    said = "\n".join(journal.skipped)
    assert 'line 1: launch record: pid is "4242x", not an int (skipped)' in said
    assert 'line 3: bisect_trial record: role is "referee", not one of good, bad, candidate, drift' in said
    assert "line 4: stop record: profile is missing" in said


def test_a_result_names_the_source_it_measured(tmp_path: Path) -> None:
    source = ServerSource(cwd="/srv/wt-b", worktree="/srv/wt-b", commit="a" * 40, dirty=False)
    journal = Journal(tmp_path / "s")
    journal.append(BenchResultRecord(result=RESULT, source=source))
    journal.append(BenchResultRecord(result=RESULT.model_copy(update={"profile": "unproven"})))
    first, second = history(journal.records())
    assert first.source == source and second.source is None
    assert first.to_json()["source"]["commit"] == "a" * 40 and second.to_json()["source"] is None
    md = render_markdown(journal.records())
    assert f"- #1: /srv/wt-b @ {'a' * 12}" in md and "- #2:" not in md


def test_every_kind_with_absent_values_reads_back_as_written(tmp_path: Path) -> None:
    """Issue 39: a bisect_start whose knob is absent on one side (good=None: almost every pair) was
    written without `good` and refused on read ("knobs.0.good is missing (skipped)"), so --resume
    found no unfinished bisection and history/report warned.  Every kind, with every optional value
    left absent (None) where it may be, nested ones too, reads back as the model that wrote it."""
    from specdebug.core.deployment.tracker import DeploymentVerdict, NodeSummary
    from specdebug.core.records import KNOWN, DeploymentVerdictRecord

    server = ServerRecord(profile="base", pid=4242, pgid=4242, port=30000, log_file="/l", cwd=None)
    knobs = [
        bm.KnobRow(name="--x", kind="flag", good=None, bad="1", unit="--x"),
        bm.KnobRow(name="NCCL_P", kind="env", good="Simple", bad=None, unit="NCCL_P"),
    ]
    trial = bm.Measurement(
        bisect="b1", config="a", fingerprint="g", settings="s", role=bm.Role.CANDIDATE,
        gate=bm.GateCheck(expr="verify_ms<=25", name="verify_ms", value=None, passed=None), reason=None,
    )  # fmt: skip
    result = bm.Result(
        verdict="cannot-tell", bisect="b1", knobs=knobs, explained=None,
        effects={"--x": bm.Effect(share=None, basis="not measured")},
        trials=[bm.TrialRow(index=0, role=bm.Role.GOOD, config="a", applied=[], fingerprint="g", metric=None)],
    )  # fmt: skip
    made = [
        LaunchRecord(server=server, drift=None),
        VerdictRecord(outcome=Verdict(verdict="failed", profile="base", reason=None), host=None),
        DeploymentVerdictRecord(
            outcome=DeploymentVerdict(
                verdict="failed",
                profile="d",
                failed_node=None,
                leader=None,
                nodes=[NodeSummary(host="n1", rank=0, pid=None, last_phase=None)],
            )
        ),  # fmt: skip
        StopRecord(stop=StopResult(profile="base", pid=None, step=None), host=None),
        BenchResultRecord(result=RESULT, source=None),
        MarkRecord(label=None, host=None),
        BisectStartRecord(
            bisect="b1",
            good={"file": "a.toml"},
            bad={"file": "b.toml"},
            options=bm.BisectOptions(threshold=None, gate=None, requests=None, max_age_s=None),
            knobs=knobs,
        ),  # fmt: skip
        BisectTrialRecord(trial=trial),
        BisectJudgementRecord(bisect="b1", fingerprint="g", settings=None, judged=bm.Judged.UNCLEAR),
        BisectResultRecord(result=result),
        BisectLaunchRecord(profile="a", pid=9, port=None, bisect=None, host=None),
        BisectStopRecord(profile="a", pid=9, host=None),
        SpecAdviceTryRecord(
            profile="p", config="p.try-d2", depth=2, predicted_tok_s=None, measured_tok_s=None
        ),
    ]
    assert {r.kind for r in made} == set(KNOWN)  # a new kind must be added here
    journal = Journal(tmp_path / "s")
    for record in made:
        journal.append(record)
    back = journal.records()
    assert journal.skipped == []
    for wrote, read in zip(made, back, strict=True):
        assert type(read) is type(wrote)
        assert read.model_dump(exclude={"ts"}) == wrote.model_dump(exclude={"ts"}), wrote.kind
    start = unfinished(back)
    assert start is None  # the result closed it
    assert unfinished(back[:-5]) is not None and unfinished(back[:-5]).knobs[0].good is None  # type: ignore[union-attr]


def test_a_start_record_written_before_the_fix_reads_back(tmp_path: Path) -> None:
    """Journals already written left a knob's absent side out: they read back with None."""
    line = {
        "kind": "bisect_start", "ts": 1.0, "bisect": "b", "good": {"file": "a.toml"}, "bad": {"file": "b.toml"},
        "knobs": [{"name": "x", "kind": "flag", "bad": "1", "unit": "x"}],
    }  # fmt: skip
    (tmp_path / "events.jsonl").write_text(json.dumps(line) + "\n")
    journal = Journal(tmp_path)
    records = journal.records()
    assert journal.skipped == [] and isinstance(records[0], BisectStartRecord)
    assert records[0].knobs[0].good is None and records[0].knobs[0].bad == "1"
