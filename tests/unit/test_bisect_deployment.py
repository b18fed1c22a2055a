"""Bisecting deployments: which pairs of profiles can be bisected as deployments (pure), and how a
candidate of a deployment is placed (the knob on every node, per-node logs and records)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bisect.deploytrial import refusal
from specdebug.core.bisect.knobs import Candidates
from specdebug.core.deployment import place
from specdebug.core.profiles import load_profile

BASE = """\
name = "{name}"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--tp", "16", "--port", "30000"{flags}]
log_file = "/tmp/sd/{name}.log"
[server.env]
NCCL_ALGO = "{algo}"
[deployment]
nodes = {nodes}
dist_init_port = 20000
leader_address = "10.0.0.1"
[deployment.node_args]
node1 = ["--port", "{port1}", "--log-file", "/tmp/sd/{name}.sim1.log"]
{node_env}
"""


def prof(tmp_path: Path, name: str, **kw: str):
    fields = {
        "name": name,
        "flags": "",
        "algo": "Ring",
        "nodes": '["node0", "node1"]',
        "port1": "30001",
        "node_env": "",
        **kw,
    }
    path = tmp_path / f"{name}.toml"
    path.write_text(BASE.format(**fields))
    return load_profile(path)


def test_same_nodes_can_be_bisected_plumbing_per_node_ignored(tmp_path: Path) -> None:
    good = prof(tmp_path, "g")
    bad = prof(tmp_path, "b", algo="Tree", flags=', "--log-requests"')  # names, logs differ: plumbing
    assert refusal(good, bad) is None


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (
            {"nodes": '["node0", "node2"]'},
            "the deployments' nodes differ (good: node0, node1; bad: node0, node2)",
        ),
        (
            {"node_env": '[deployment.node_env.node1]\nNCCL_IB_DISABLE = "1"'},
            "differ for node1 (NCCL_IB_DISABLE)",
        ),
    ],
)
def test_different_placement_is_refused_in_one_line(tmp_path: Path, bad: dict, says: str) -> None:
    kw = dict(bad)
    if "node2" in kw.get("nodes", ""):
        text = BASE.replace("node1 = [", "node2 = [")
        path = tmp_path / "b.toml"
        fields = {"name": "b", "flags": "", "algo": "Ring", "port1": "30001", "node_env": "", **kw}
        path.write_text(text.format(**fields))
        b = load_profile(path)
    else:
        b = prof(tmp_path, "b", **kw)
    why = refusal(prof(tmp_path, "g"), b)
    assert why is not None and says in why and "\n" not in why, why


def test_one_side_without_deployment_is_refused(tmp_path: Path) -> None:
    good = prof(tmp_path, "g")
    plain = tmp_path / "p.toml"
    plain.write_text('name = "p"\n[server]\nargv = ["python3", "-m", "sglang.launch_server"]\n')
    assert "the good profile has [deployment] and the bad one does not" in (
        refusal(good, load_profile(plain)) or ""
    )
    assert refusal(load_profile(plain), load_profile(plain)) is None


def test_a_candidate_moves_the_knob_on_every_node(tmp_path: Path) -> None:
    good, bad = prof(tmp_path, "g"), prof(tmp_path, "b", algo="Tree")
    c = Candidates(good, bad)
    c.tag = "abcdef123"
    cand, fp = c.profile(frozenset({0}))
    assert fp == bad.fingerprint() and cand is bad  # one knob: all of them is the bad end
    c = Candidates(good, prof(tmp_path, "b2", algo="Tree", flags=', "--log-requests"'))
    c.tag = "abcdef123"
    env_unit = next(i for i, u in enumerate(c.units) if u.knobs == ["NCCL_ALGO"])
    cand, _ = c.profile(frozenset({env_unit}))
    dep = place(cand)
    assert [n.profile.server.env["NCCL_ALGO"] for n in dep.nodes] == ["Tree", "Tree"]
    assert [n.profile.name for n in dep.nodes] == [f"{cand.name}.node0", f"{cand.name}.node1"]
    logs = [n.profile.server.log_file for n in dep.nodes]
    assert logs == [f"/tmp/sd/{cand.name}.node0.log", f"/tmp/sd/{cand.name}.node1.log"]
