"""Bisection over the real sshd on the sim: one culprit among 7 knobs within ceil(log2 7)+1 launches
besides the ends, kill -9 of `specdebug bisect` mid-run then --resume without repeating a finished
trial, the same bisection again launching nothing, and a pair of knobs that only hurt together
found by delta debugging (the engine in-process, as the pane drives it)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from specdebug.core.bisect.models import TRIAL_EVENT, BisectOptions, Finished
from specdebug.core.bisect.run import Bisection
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile
from specdebug.core.servers import forget_record
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, PAIR, forget_records, harmless_env, write_pair

SEVEN = [*HARMLESS_FLAGS[:4], CULPRIT, *HARMLESS_FLAGS[4:5]]  # 6 flags + 1 env var = 7 knobs


def bisect_cmd(sshd, good: Path, bad: Path, session: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "specdebug.cli",
        "bisect",
        "-F",
        str(sshd.config_path),
        "gpubox",
        "--good",
        str(good),
        "--bad",
        str(bad),
        "--session",
        str(session),
        "--json",
        *extra,
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


@pytest.fixture(scope="module")
def killed_resumed_again(sshd, tmp_path_factory):
    """Run 1 is killed -9 while a candidate starts; run 2 resumes; run 3 repeats the bisection."""
    tmp = tmp_path_factory.mktemp("bisect7")
    good, bad = write_pair(tmp / "p", bad_flags=SEVEN, bad_env=harmless_env(1), tag="bx7-")
    session = tmp / "session"
    journal = Journal(session)
    proc = subprocess.Popen(
        bisect_cmd(sshd, good, bad, session),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(lambda: len(trial_events(session)) >= 3, 120, "three finished trials")
        launches = lambda: len(journal.events({"launch"}))  # noqa: E731
        wait_for(lambda: launches() >= 4, 60, "the fourth launch")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    before = trial_events(session)
    resumed = subprocess.run(
        bisect_cmd(sshd, good, bad, session, "--resume"), capture_output=True, text=True, timeout=180
    )
    after_resume = trial_events(session)
    again = subprocess.run(bisect_cmd(sshd, good, bad, session), capture_output=True, text=True, timeout=120)
    yield {
        "before": before,
        "resumed": resumed,
        "after_resume": after_resume,
        "again": again,
        "session": session,
    }
    forget_records(sshd, [load_profile(good).name, load_profile(bad).name])


def test_one_culprit_among_seven_knobs_within_the_bound(killed_resumed_again) -> None:
    run = killed_resumed_again["resumed"]
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert len(result["knobs"]) == 7
    assert result["verdict"] == "found" and result["culprits"] == ["--disable-cuda-graph"]
    assert result["search"] == "binary" and result["naive_launches"] == 9
    candidates = {e["fingerprint"] for e in killed_resumed_again["after_resume"] if e["role"] == "candidate"}
    assert len(candidates) <= math.ceil(math.log2(7)) + 1
    culprit_row = next(t for t in result["trials"] if t["applied"] == ["--disable-cuda-graph"])
    assert culprit_row["judged"] == "bad" and culprit_row["fingerprint"]
    ends = result["evidence"]
    assert ends["good_mean"] > ends["threshold"] > ends["bad_mean"]


def test_kill_9_then_resume_repeats_no_finished_trial(killed_resumed_again) -> None:
    before = killed_resumed_again["before"]
    after = killed_resumed_again["after_resume"]
    assert len(before) >= 3
    assert after[: len(before)] == before  # the journal kept every finished trial
    counts = Counter(e["fingerprint"] for e in after)
    assert all(n == 1 for n in counts.values()), counts  # nothing measured twice
    result = json.loads(killed_resumed_again["resumed"].stdout)
    assert result["launches"] == len(after) - len(before)
    cached = [t for t in result["trials"] if t["cached"]]
    assert {t["fingerprint"] for t in cached} >= {e["fingerprint"] for e in before}


def test_same_bisection_again_launches_nothing(killed_resumed_again) -> None:
    run = killed_resumed_again["again"]
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["launches"] == 0 and result["culprits"] == ["--disable-cuda-graph"]
    assert all(t["cached"] for t in result["trials"])
    assert trial_events(killed_resumed_again["session"]) == killed_resumed_again["after_resume"]


async def test_pair_only_hurting_together_found_by_ddmin(remote, tmp_path: Path) -> None:
    good, bad = write_pair(tmp_path, bad_flags=PAIR, tag="bxpair-")
    g, b = load_profile(good), load_profile(bad)
    engine = Bisection(remote, g, b, BisectOptions(), journal=Journal(tmp_path / "session"))
    try:
        events = [ev async for ev in engine.events()]
    finally:
        for name in (g.name, b.name):
            await forget_record(remote, name)
    result = events[-1].result
    assert isinstance(events[-1], Finished)
    assert result.verdict == "found" and result.search == "ddmin"
    assert sorted(result.culprits) == ["--speculative-eagle-topk", "--speculative-num-draft-tokens"]
    alone = [t for t in result.trials if t.role == "candidate" and len(t.applied) == 1]
    assert len(alone) == 2 and all(t.judged == "good" for t in alone)  # each alone is harmless
    assert result.launches == 4  # two ends + each knob alone; ddmin reuses those results
