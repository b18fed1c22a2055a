"""A front end and core meet at one Target: each verb that acts on a profile hands the core function it
calls the profile placed by `core.deployment.place` (its nodes, ranks and node profiles), for a one-box
profile (one node on HOST) and a two-node `[deployment]` alike (issue 38: "a pane and its verb call the
same core function with the same target").

Each verb runs in-process (its async entry, parsed by the real verb table) over the loopback cluster
(two sshd addresses); the core function is replaced by a spy that keeps the target and stops the verb
there, so no server starts.  The panes' side (branch target-tui) adds its cases with `expected_nodes`
and `nodes_of`: the same expectation for the pane's call.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from specdebug.core.deployment import place
from specdebug.core.profiles import Profile, load_profile
from specdebug.core.target import Target
from specdebug.verbs.table import verb_parser
from tests.cluster_harness import Cluster, cluster_fixture
from tests.deployprofiles import dep_profile
from tests.sshd_harness import free_port

pytestmark = [pytest.mark.slow, pytest.mark.spread]  # the cluster fixture is two loopback sshds

cluster = cluster_fixture("same-core")


# --- the shared expectation (the panes' tests use these two too) ---------------------------------


def expected_nodes(
    profile: Profile, host: str | None, ssh_config: str | Path | None
) -> list[tuple[Any, ...]]:
    """What `place` gives for the profile on HOST: (host, rank, node profile as JSON) per node."""
    return nodes_of(place(profile, host, ssh_config=ssh_config).nodes)


def nodes_of(nodes: Any) -> list[tuple[Any, ...]]:
    """A target's nodes in the same shape (a Target, a Deployment or its nodes)."""
    nodes = getattr(nodes, "nodes", nodes)
    return [(n.host, n.rank, n.profile.model_dump(mode="json")) for n in nodes]


# --- the verbs -------------------------------------------------------------------------------------


class Spied(Exception):
    """Raised by a spy once it has the target: the verb stops there (no server is started)."""


def spy(monkeypatch: pytest.MonkeyPatch, where: Any, name: str, got: list[Target]) -> None:
    def stand_in(target: Target, *args: Any, **kwargs: Any) -> Any:
        got.append(target)
        raise Spied(name)

    monkeypatch.setattr(where, name, stand_in)  # raising=True: a verb not on the target seam fails here


def run_verb(verb: str, *argv: str) -> None:
    args, extras = verb_parser(verb).parse_known_args(list(argv))
    assert not extras, extras
    with pytest.raises(Spied):
        asyncio.run(args.func(args))


def one_box_profile(tmp_path: Path) -> Path:
    """A profile without `[deployment]`: one node on the HOST the verb is given."""
    port = free_port()
    argv = [sys.executable, "-m", "specdebug.sim", "--port", str(port), "--time-scale", "0.02"]
    path = tmp_path / "one.toml"
    path.write_text(
        f'name = "one-{port}"\n[server]\nkind = "sglang"\nargv = {json.dumps(argv)}\n'
        f"log_file = {json.dumps(str(tmp_path / 'one.log'))}\nport = {port}\n[ready]\ntimeout_s = 60\n"
    )
    return path


def bad_end(path: Path, tmp_path: Path, stem: str) -> Path:
    """The bisection's other end: the same profile with one env knob more."""
    text = path.read_text()
    name_line = text.splitlines()[0]  # name = "..."
    head, sep, rest = text.replace(name_line, name_line[:-1] + '-bad"', 1).partition("[ready]")
    bad = tmp_path / f"{stem}-bad.toml"
    bad.write_text(head + 'env.SPEC_KNOB = "1"\n' + sep + rest)  # the last lines of [server]
    return bad


CASES = ["one-box", "deployment"]


def profile_and_host(case: str, tmp_path: Path) -> tuple[Path, str | None]:
    if case == "one-box":
        return one_box_profile(tmp_path), "node0"
    return dep_profile(tmp_path, "same"), None


@pytest.mark.parametrize("case", CASES)
def test_launch_env_grep_bench_hand_core_the_placed_target(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    import specdebug.core.deployment.control as control
    import specdebug.core.deployment.node_env as node_env
    import specdebug.core.logs.matches as matches
    import specdebug.verbs.bench as bench_verb

    path, host = profile_and_host(case, tmp_path)
    cfg = str(cluster.config_path)
    want = expected_nodes(load_profile(path), host, cfg)
    on = [host] if host else []
    session = ["--session", str(tmp_path / "session")]
    calls = {
        "launch": (control, "launch_target", ["launch", *on, "-c", str(path), "-F", cfg, *session]),
        "env": (node_env, "target_env", ["env", *on, "-c", str(path), "-F", cfg]),
        # one box: the profile's log named on its HOST; a deployment: every node's log
        "grep": (
            matches,
            "follow_target_logs",
            ["grep", *([f"{host}:{tmp_path / 'one.log'}"] if host else []), "-c", str(path), "-e", "x"]
            + ["-F", cfg],
        ),
        "bench": (bench_verb, "target_bench_events", ["bench", *on, "-c", str(path), "-F", cfg, *session]),
    }
    for verb, (where, name, argv) in calls.items():
        got: list[Target] = []
        spy(monkeypatch, where, name, got)
        run_verb(argv[0], *argv[1:])
        assert len(got) == 1, verb
        assert nodes_of(got[0]) == want, verb
        assert sorted(got[0].remotes) == sorted(n[0] for n in want), verb  # every node connected
        assert got[0].multi is (case == "deployment"), verb


@pytest.mark.parametrize("case", CASES)
def test_bisect_trials_run_on_the_candidate_placed_on_the_target(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    import specdebug.core.bisect.trial as trial

    good, host = profile_and_host(case, tmp_path)
    bad = bad_end(good, tmp_path, case)
    cfg = str(cluster.config_path)
    got: list[Target] = []
    spy(monkeypatch, trial, "launch_target", got)
    on = [host] if host else []
    argv = ["bisect", *on, "--good", str(good), "--bad", str(bad), "-F", cfg]
    run_verb(*argv, "--session", str(tmp_path / "bisect-session"))
    assert len(got) == 1
    first = got[0]  # the first trial: one of the ends, placed on the good profile's nodes
    assert first.profile.name in (load_profile(good).name, load_profile(bad).name)
    assert nodes_of(first) == expected_nodes(first.profile, host, cfg)
    assert sorted(first.remotes) == sorted(n[0] for n in nodes_of(first))
