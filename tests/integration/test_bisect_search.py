"""Bisection over the real sshd on the sim, each scenario on its own port, all run at once (a
bisection mostly waits on its server, so running them side by side keeps the tier fast):

* `specdebug bisect` over 7 knobs with one culprit, killed -9 the moment a candidate's result is
  journaled (its server still up), then
  --resume: the culprit within ceil(log2 7)+2 launches besides the ends (the confirmation included),
  no finished trial repeated;
  then the same bisection again in the same session launches nothing;
* a pair of knobs that only hurt together: an interaction, shown by the numbers, found by delta debugging;
* --noise 0.03 on the sim with --repeats 3: a spread with its degrees of freedom, the right culprit;
* a candidate that fails to start (CUDA OOM), skipped with its reason, or bad with --failed-start bad;
  and a verify gate that judges a candidate bad from the log without a benchmark.
The engine scenarios drive `Bisection` in-process, as the Bisect pane does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from specdebug.core.bisect import run as bisect_run
from specdebug.core.bisect.models import (
    TRIAL_EVENT,
    BisectOptions,
    Finished,
    Phase,
    TrialProgress,
    TrialStarted,
)
from specdebug.core.bisect.run import Bisection
from specdebug.core.control.records import forget_record
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile
from specdebug.core.report import render_markdown
from tests import clifork
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, PAIR, forget_records, harmless_env, write_pair
from tests.boxes import ssh_box

SEVEN = [*HARMLESS_FLAGS[:4], CULPRIT, *HARMLESS_FLAGS[4:5]]  # 6 flags + 1 env var = 7 knobs
OOM = ["--mem-fraction-static", "0.99"]  # no room for cuda graphs, fine without them
GATE = "verify_ms<=19"  # the 2-step config verifies in ~16 ms, without cuda graphs ~21.6 ms
# Judged by the server's own decode throughput (its log): side by side on a loaded 2-core machine this
# test process's own stalls would shift a client-timed tok/s by 20 %; the sim's clock does not stall.
METRIC = "gen_throughput"


def bisect_cmd(sshd, good: Path, bad: Path, session: Path, *extra: str) -> list[str]:
    return [
        *(sys.executable, "-m", "specdebug.cli", "bisect", "-F", str(sshd.config_path), "gpubox"),
        *(
            "--good",
            str(good),
            "--bad",
            str(bad),
            "--session",
            str(session),
            "--metric",
            METRIC,
            "--json",
            *extra,
        ),
    ]


def trial_events(session: Path) -> list[dict]:
    return Journal(session).events({TRIAL_EVENT})


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def launched_while_measuring(session: Path) -> bool:
    """The ends (once each: issue 39) and a candidate are journaled, and the next candidate's server is up."""
    events = Journal(session).events({"bisect_launch", TRIAL_EVENT})
    return sum(e["kind"] == TRIAL_EVENT for e in events) >= 3 and events[-1]["kind"] == "bisect_launch"


def cli_scenario(sshd, tmp: Path) -> dict:
    """Run 1 is killed -9 while a candidate's server runs (after the ends and a first candidate
    were journaled); run 2 is `--resume` alone (ends and options from the journal), which names and
    stops that server first; run 3 repeats the bisection."""
    good, bad = write_pair(tmp / "seven", bad_flags=SEVEN, bad_env=harmless_env(1), tag="bx7-")
    session = tmp / "seven" / "session"
    proc = subprocess.Popen(
        bisect_cmd(sshd, good, bad, session),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(lambda: launched_while_measuring(session), 200, "the ends, a candidate, the next launched")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    out = {"before": trial_events(session), "session": session}
    out["left"] = Journal(session).events({"bisect_launch"})[-1]
    resume = [*bisect_cmd(sshd, good, bad, session)[:7], "--session", str(session), "--json", "--resume"]
    out["resumed"] = clifork.run(resume, capture_output=True, text=True, timeout=200)
    out["after_resume"] = trial_events(session)
    out["again"] = clifork.run(
        bisect_cmd(sshd, good, bad, session), capture_output=True, text=True, timeout=120
    )
    return out


async def engine_run(remote, good: Path, bad: Path, options: BisectOptions, journal: Journal) -> list:
    g, b = load_profile(good), load_profile(bad)
    try:
        return [ev async for ev in Bisection(remote, g, b, options, journal=journal).events()]
    finally:
        for name in (g.name, b.name):
            await forget_record(remote, name)


async def engine_scenarios(sshd, tmp: Path) -> dict:
    remote = ssh_box(sshd.alias, ssh_config=sshd.config_path, keepalive_interval=1.0, connect_timeout=5.0)
    await remote.start()
    await remote.wait_connected(15)

    async def pair() -> dict:
        # one request per benchmark: with two, one log sample spans the gap between them, which is
        # this loaded machine's client round trip, not the sim's clock (readings moved by ~3 %)
        good, bad = write_pair(tmp / "pair", bad_flags=PAIR, tag="bxpair-", requests=1)
        return {
            "events": await engine_run(
                remote, good, bad, BisectOptions(metric=METRIC), Journal(tmp / "pair" / "s")
            )
        }

    async def noise() -> dict:
        good, bad = write_pair(
            tmp / "noise",
            bad_flags=[CULPRIT, HARMLESS_FLAGS[0]],
            sim_extra=["--noise", "0.03"],
            output_len=128,  # the sim's noise, not this machine's load, must dominate
            tag="bxnoise-",
        )
        journal = Journal(tmp / "noise" / "s")
        return {
            "events": await engine_run(remote, good, bad, BisectOptions(metric=METRIC, repeats=3), journal)
        }

    async def faults() -> dict:
        # one request of 128 tokens, as pair(): two put this machine's client round trip in a log
        # sample, and the drift check once read the good end 3 % lower under load (cannot-tell)
        good, bad = write_pair(
            tmp / "faults",
            bad_flags=[OOM, HARMLESS_FLAGS[0], CULPRIT],
            tag="bxfault-",
            requests=1,
            output_len=128,
        )
        journal = Journal(tmp / "faults" / "s")
        skip = await engine_run(remote, good, bad, BisectOptions(metric=METRIC, gate=GATE), journal)
        as_bad = await engine_run(
            remote, good, bad, BisectOptions(metric=METRIC, gate=GATE, failed_start="bad"), journal
        )
        return {"events": skip, "events_bad": as_bad, "journal": journal, "good": load_profile(good)}

    names = ("pair", "noise", "faults")
    try:
        done = await asyncio.gather(pair(), noise(), faults(), return_exceptions=True)
    finally:
        await remote.close()
    return dict(zip(names, done, strict=True))


@pytest.fixture(scope="module")
def scenarios(sshd, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bisect")
    results: dict = {}

    def cli() -> None:
        try:
            results["cli"] = cli_scenario(sshd, tmp)
        except BaseException as exc:  # reported by the tests that need it
            results["cli"] = exc

    thread = threading.Thread(target=cli, name="bisect-cli")
    thread.start()
    try:
        # four bisections share this box at once to save time (one box of a real GPU machine would
        # refuse the second: core/bisect/boxlock.py, tested in tests/security): the CLI run takes the
        # lock, the in-process ones run without it
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bisect_run, "hold_box", _no_lock)
            results.update(asyncio.run(engine_scenarios(sshd, tmp)))
        thread.join(400)
        yield results
    finally:
        names = [
            f"{tag}{side}" for tag in ("bx7-", "bxpair-", "bxnoise-", "bxfault-") for side in ("good", "bad")
        ]
        forget_records(sshd, names, sorted(p.parent for p in tmp.rglob("events.jsonl")))


@contextlib.asynccontextmanager
async def _no_lock(*args, **kwargs):
    yield


def told(result) -> str:
    """What a failed assertion shows: every trial with its judgement and reason."""
    rows = [f"#{t.index} {t.role.value} {t.applied} {t.samples} {t.judged} {t.reason}" for t in result.trials]
    return "\n".join([f"{result.verdict} {result.culprits} {result.notes}", *rows])


def scenario(scenarios: dict, name: str):
    value = scenarios[name]
    if isinstance(value, BaseException):
        raise value
    return value


def test_one_culprit_among_seven_knobs_within_the_bound(scenarios) -> None:
    cli = scenario(scenarios, "cli")
    run = cli["resumed"]
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert len(result["knobs"]) == 7
    assert result["verdict"] == "found" and result["culprits"] == ["--disable-cuda-graph"]
    assert result["search"] == "split" and result["naive_launches"] == 11 and result["confirmed"]
    assert result["effects"]["--disable-cuda-graph"]["share"] > 0.8 and result["explained"] > 0.8
    candidates = {e["fingerprint"] for e in cli["after_resume"] if e["role"] == "candidate"}
    assert len(candidates) <= math.ceil(math.log2(7)) + 1 + 1  # + the confirmation launch
    culprit_row = next(t for t in result["trials"] if t["applied"] == ["--disable-cuda-graph"])
    assert culprit_row["judged"] == "bad" and culprit_row["fingerprint"]
    ends = result["evidence"]
    assert ends["good_mean"] > ends["threshold"] > ends["bad_mean"]


def test_kill_9_then_resume_repeats_no_finished_trial(scenarios) -> None:
    cli = scenario(scenarios, "cli")
    # `--resume` alone: the start record (knobs absent on the good side) reads back (issue 39)
    assert cli["resumed"].returncode == 0, cli["resumed"].stderr[-2000:]
    assert "(skipped)" not in cli["resumed"].stderr
    left = cli["left"]  # the killed run's server, named and stopped before anything else
    said = [
        line for line in cli["resumed"].stderr.splitlines() if "left running by an interrupted run" in line
    ]
    assert said and left["profile"] in said[0] and f"pid {left['pid']}" in said[0], said
    stops = Journal(cli["session"]).events({"bisect_stop"})
    assert any(e["pid"] == left["pid"] for e in stops)
    before, after = cli["before"], cli["after_resume"]
    assert len(before) >= 3  # the ends once each (issue 39) and a candidate
    assert after[: len(before)] == before  # the journal kept every finished trial
    counts = Counter(e["fingerprint"] for e in after if e["role"] == "candidate")
    assert all(n <= 4 for n in counts.values()), counts  # repeats only while within the noise (--repeats 4)
    result = json.loads(cli["resumed"].stdout)
    assert result["launches"] == len(after) - len(before)
    cached = {t["fingerprint"] for t in result["trials"] if t["cached"]}
    assert cached >= {e["fingerprint"] for e in before}


def test_same_bisection_again_launches_nothing(scenarios) -> None:
    cli = scenario(scenarios, "cli")
    run = cli["again"]
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["launches"] == 0 and result["culprits"] == ["--disable-cuda-graph"]
    assert all(t["cached"] for t in result["trials"])
    assert trial_events(cli["session"]) == cli["after_resume"]


def test_pair_only_hurting_together_found_by_ddmin(scenarios) -> None:
    events = scenario(scenarios, "pair")["events"]
    assert isinstance(events[-1], Finished)
    result = events[-1].result
    assert result.verdict == "interaction" and result.search == "split+ddmin", told(result)
    assert sorted(result.culprits) == ["--speculative-eagle-topk", "--speculative-num-draft-tokens"]
    alone = [t for t in result.trials if t.role == "candidate" and len(t.applied) == 1]
    assert len(alone) == 2 and all(t.judged == "good" for t in alone)  # each alone is harmless
    assert all(abs(result.effects[k].share) < 0.1 for k in result.culprits)  # shown by the numbers
    assert result.confirmed  # the additive fit over every reading (the good end measured again among them)
    # the ends once each + each knob alone + the good end again, and the fit's repeats where it needs
    # them: never more than one knob at a time (issue 39: 7 launches, one knob at a time 6)
    assert result.launches <= result.naive_launches == 6, told(result)


def test_noise_003_with_three_repeats_finds_the_right_culprit(scenarios) -> None:
    events = scenario(scenarios, "noise")["events"]
    assert isinstance(events[-1], Finished)
    result = events[-1].result
    ev = result.evidence
    assert ev is not None and 1 <= len(ev.good_samples) <= 3 and 1 <= len(ev.bad_samples) <= 3
    assert len(set(ev.good_samples)) == len(ev.good_samples)  # every launch drew its own noise
    assert "standard errors" in ev.why
    if result.verdict == "found":
        # a culprit named with exit 0 rests on ends proven apart: by their own runs, or by the additive
        # fit over every reading (CI, 2026-12-06: one run of each end short of t99 at the 2 dof three
        # repeats measured, the fit's 4 dof proving the gap).  An inconclusive verdict (the
        # confirmation too wide for 2 dof: about 1 run in 17 of a stand-in stress) may say they are not.
        assert ev.distinguishable, told(result)
    # each end once (25 % apart: issue 39), then the candidates; the fit measures the noise before a name
    roles = [e.role.value for e in events if isinstance(e, TrialStarted)]
    assert roles[:2] == ["good", "bad"]
    if result.verdict == "found":
        assert any("additive fit" in n for n in result.notes), told(result)
    if result.verdict == "cannot-tell":
        # The good end's first draws can both come out high (one full run in four on 2026-12-04:
        # 95.4 and 96.5, then the harmless knob 92.0, 92.3, 92.0; gen_throughput does not move with
        # this machine's load): the search then takes the harmless knob for a small effect too, and
        # the good end measured again (91.8) shows the two ends' readings disagree.  Naming nobody
        # is the right answer there (naming would include the harmless knob): the culprit among
        # the suspects, the good end measured again, no name claimed.
        # (or the additive fit could not confirm within one knob at a time's launches: issue 39)
        suspects = [n for n in result.notes if n.startswith("not named culprits")]
        assert not suspects or "--disable-cuda-graph" in suspects[0], told(result)
        assert result.culprits == [], told(result)
        return
    # the right culprit and never the harmless flag; at 3 % noise three repeats usually confirm it,
    # but a draw can leave the confirmation too wide (CI saw +6 % of the gap, up to +39 %): then the
    # verdict must say so and stay unconfirmed (exit 1), never "found" and never "does not close"
    assert result.culprits == ["--disable-cuda-graph"], told(result)
    if result.verdict != "found":
        assert result.verdict == "inconclusive" and not result.confirmed, told(result)
        assert any("too noisy to decide" in n or "additive fit" in n for n in result.notes), told(result)
    assert result.effects["--disable-cuda-graph"].share > 0.7
    assert result.confirmed or result.verdict != "found"
    assert result.naive_launches == len(result.knobs) + 4


def test_failed_start_skip_then_bad(scenarios) -> None:
    faults = scenario(scenarios, "faults")
    result = faults["events"][-1].result
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"], told(result)
    failed = next(t for t in result.trials if t.applied == ["--mem-fraction-static", "--schedule-policy"])
    assert failed.judged == "skip" and "failed to start" in failed.reason and failed.metric is None
    assert "memory" in failed.reason.lower()  # the reason is kept: the OOM line
    assert any("from the good side" in n for n in result.notes)  # the rest does not start: confirmed forward
    # the same session with --failed-start bad: the failed start counts as the whole effect, so the
    # knob that makes it fail is a culprit too; the confirmation finds the slow knob in the rest
    result_bad = faults["events_bad"][-1].result
    assert result_bad.verdict == "several", told(result_bad)
    assert result_bad.culprits == ["--mem-fraction-static", "--disable-cuda-graph"], told(result_bad)
    # what the first bisection measured is reused (the knobs one at a time, issue 39); the rest, the good
    # end again, repeats within the noise at most
    assert 1 <= result_bad.launches <= 7
    # a failed start the second bisection reads from the first's journal is judged bad, not launched
    # (its knobs one at a time may not ask for it: issue 39)
    cached_fail = next((t for t in result_bad.trials if t.fingerprint == failed.fingerprint), None)
    assert cached_fail is None or cached_fail.cached and cached_fail.judged == "bad"
    assert any(t.cached and t.judged == "bad" and t.role.value == "candidate" for t in result_bad.trials)
    journal, good = faults["journal"], faults["good"]
    # one fingerprint: the launch verdicts in the journal carry the same value as the trial cache
    verdicts = {e["fingerprint"] for e in journal.events({"verdict"}) if e["profile"] == good.name}
    trials = {e["fingerprint"] for e in journal.events({TRIAL_EVENT}) if e["config"] == good.name}
    assert verdicts == trials == {good.fingerprint()}
    report = render_markdown(journal.records())  # the session report holds both bisections
    assert report.count("### bxfault-good (good) vs bxfault-bad (bad): found") == 1
    assert report.count("### bxfault-good (good) vs bxfault-bad (bad): several") == 1
    assert "culprit: `--disable-cuda-graph`" in report
    assert "culprits: `--mem-fraction-static`, `--disable-cuda-graph`" in report


def test_gate_judges_without_a_benchmark(scenarios) -> None:
    events = scenario(scenarios, "faults")["events"]
    result = events[-1].result
    gated = next(t for t in result.trials if t.applied == ["--disable-cuda-graph"])
    assert gated.judged == "bad" and gated.gated and gated.metric is None
    assert gated.gate_value is not None and gated.gate_value > 19 and f"gate {GATE}" in gated.reason
    phases = {e.phase for e in events if isinstance(e, TrialProgress) and e.index == gated.index}
    assert Phase.GATE in phases and Phase.BENCH not in phases  # judged without a benchmark
