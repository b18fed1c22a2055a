"""Bisecting deployments: which pairs of profiles can be bisected as deployments (pure), and how a
candidate of a deployment is placed (the knob on every node, per-node logs and records)."""

from __future__ import annotations

from pathlib import Path

from specdebug.core.bisect.knobs import Candidates
from specdebug.core.bisect.trial import refusal
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


def test_different_nodes_are_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    fields = {"name": "b", "flags": "", "algo": "Ring", "port1": "30001", "node_env": ""}
    path.write_text(BASE.replace("node1 = [", "node2 = [").format(nodes='["node0", "node2"]', **fields))
    why = refusal(prof(tmp_path, "g"), load_profile(path))
    assert why is not None and "\n" not in why, why
    assert "the deployments' nodes differ (good: node0, node1; bad: node0, node2)" in why


def test_a_per_node_difference_is_a_knob_of_that_node_only(tmp_path: Path) -> None:
    """`node_env` / `node_args` that differ on node1 are knobs named [node1] ..., moved on node1 only."""
    good = prof(tmp_path, "g")
    env1 = '[deployment.node_env.node1]\nNCCL_IB_DISABLE = "1"'
    bad = prof(tmp_path, "b", algo="Tree", node_env=env1)
    assert refusal(good, bad) is None
    c = Candidates(good, bad)
    assert [k.name for k in c.knobs] == ["NCCL_ALGO", "[node1] NCCL_IB_DISABLE"]
    assert c.good_fp != c.bad_fp and c.profile(frozenset({0, 1}))[1] == c.bad_fp
    c.tag = "abcdef123"
    cand, fp = c.profile(frozenset({1}))
    assert fp not in (c.good_fp, c.bad_fp)
    dep = place(cand)
    assert [n.profile.server.env.get("NCCL_IB_DISABLE") for n in dep.nodes] == [None, "1"]
    assert [n.profile.server.env["NCCL_ALGO"] for n in dep.nodes] == ["Ring", "Ring"]
    # a per-node flag, the node's port and log file (plumbing) left out
    bad = prof(tmp_path, "b2", port1="30009")
    bad.deployment.node_args["node1"] += ["--enable-dp-attention"]
    c = Candidates(good, bad)
    assert [(k.name, k.value_b) for k in c.knobs] == [("[node1] --enable-dp-attention", "(set)")]
    cand, fp = c.profile(frozenset({0}))
    assert fp == c.bad_fp
    assert "--enable-dp-attention" in place(cand).nodes[1].profile.server.argv


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
