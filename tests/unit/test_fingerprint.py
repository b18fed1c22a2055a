"""One fingerprint for one config: `profile check`, launch records/verdicts, bench results and the
bisection cache all use specdebug.core.fingerprint (knobs + kind; placement and flag order left out)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specdebug.core.control.tracker import StartupTracker
from specdebug.core.fingerprint import PLUMBING_FLAGS, config_fingerprint
from specdebug.core.profiles import load_profile
from tests import clifork

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_profile_check_prints_the_one_fingerprint() -> None:
    path = EXAMPLES / "eagle3-2step-nccl.toml"
    out = clifork.run(
        [sys.executable, "-m", "specdebug.cli", "profile", "check", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    profile = load_profile(path)
    srv = profile.server
    assert json.loads(out.stdout)["fingerprint"] == profile.fingerprint()
    assert profile.fingerprint() == config_fingerprint(srv.argv, srv.env, srv.kind)


def test_the_startup_tracker_stamps_the_same_value_on_its_verdict() -> None:
    profile = load_profile(EXAMPLES / "eagle3-3step.toml")
    tracker = StartupTracker(
        kind="sglang", started_at=0.0, timeout_s=5, profile=profile.name, fingerprint=profile.fingerprint()
    )
    verdict = tracker.tick(10.0)[0]
    assert verdict.fingerprint == profile.fingerprint() == verdict.summary()["fingerprint"]


def test_placement_and_order_do_not_count_but_knobs_and_kind_do() -> None:
    base = ["python3", "-m", "sglang.launch_server", "--tp", "8", "--speculative-num-steps", "2"]
    fp = config_fingerprint(base, {"NCCL_PROTO": "LL"})
    moved = [*base, "--port", "31000", "--host", "0.0.0.0", "--log-file", "/tmp/x.log"]
    assert PLUMBING_FLAGS == {"--port", "--host", "--log-file"}
    assert config_fingerprint(moved, {"NCCL_PROTO": "LL"}) == fp
    reordered = ["python3", "-m", "sglang.launch_server", "--speculative-num-steps", "2", "--tp=8"]
    assert config_fingerprint(reordered, {"NCCL_PROTO": "LL"}) == fp
    assert config_fingerprint(base, {}) != fp
    assert config_fingerprint(base, {"NCCL_PROTO": "LL"}, "vllm") != fp
    assert config_fingerprint([*base[:-1], "3"], {"NCCL_PROTO": "LL"}) != fp


def _profile_in(cwd: str | None, name: str = "p"):
    from specdebug.core.profiles import Profile

    server = {"argv": ["python3", "-m", "sglang.launch_server", "--tp", "8"], "env": {"NCCL_PROTO": "LL"}}
    if cwd is not None:
        server["cwd"] = cwd
    return Profile.model_validate({"name": name, "server": server})


def test_another_worktree_is_another_config_and_one_knob() -> None:
    """Two profiles that differ only in which worktree they run from had one fingerprint and zero
    knobs (issue 23 §3): the trial cache would answer one end with the other's measurement."""
    from specdebug.core.profiles import diff_profiles

    a, b = _profile_in("~/wt/good", "a"), _profile_in("~/wt/bad/", "b")
    assert a.fingerprint() != b.fingerprint()
    (knob,) = diff_profiles(a, b)
    assert (knob.name, knob.kind, knob.value_a, knob.value_b) == ("(cwd)", "cwd", "~/wt/good", "~/wt/bad")
    moved = a.with_knobs([knob])  # a bisection applies it like any knob
    assert moved.server.cwd == "~/wt/bad" and moved.fingerprint() == b.fingerprint()
    assert _profile_in("~/wt/good/").fingerprint() == a.fingerprint()  # a trailing / is the same folder
    # a config without a cwd keeps the fingerprint it always had (journals and caches stay valid)
    plain = _profile_in(None)
    srv = plain.server
    assert plain.fingerprint() == config_fingerprint(srv.argv, srv.env, srv.kind)
    assert plain.fingerprint() != a.fingerprint()
