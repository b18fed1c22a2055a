"""`[deployment]` in a profile: strict validation with file:line errors, and placing a profile on its
nodes (each node's flags, log, record name and env; the one-node case left as it is)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.deployment import DeploymentError, node_args, place, with_flags
from specdebug.core.profiles import ProfileError, load_profile
from specdebug.core.profiles.model import default_log_dir

SGLANG = """\
name = "big"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--tp", "16", "--port", "30000"]
[deployment]
nodes = ["node0", "node1"]
dist_init_port = 20000
leader_address = "10.0.0.1"
"""

VLLM = """\
name = "bigv"
[server]
kind = "vllm"
argv = ["vllm", "serve", "M", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
log_file = "/tmp/specdebug/bigv.log"
[deployment]
nodes = ["a@h0:2222", "slurm:77:n2"]
dist_init_port = 29501
leader_address = "10.0.0.9"
"""


def load(tmp_path: Path, text: str):
    path = tmp_path / "p.toml"
    path.write_text(text)
    return load_profile(path)


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ProfileError) as info:
        load(tmp_path, text)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_sglang_nodes_get_rank_flags_logs_and_records(tmp_path):
    dep = place(load(tmp_path, SGLANG))
    assert [n.host for n in dep.nodes] == ["node0", "node1"] and dep.leader.host == "node0"
    n0, n1 = (n.profile for n in dep.nodes)
    assert n0.server.argv[-6:] == ["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.0.0.1:20000"]
    assert n1.server.argv[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:20000"]
    assert (n0.name, n1.name) == ("big.node0", "big.node1")  # records never collide on a shared box
    assert n0.server.log_file == f"{default_log_dir()}/big.node0.log"
    assert n1.server.log_file == f"{default_log_dir()}/big.node1.log"
    assert n0.ready.require_ready_line and not n1.ready.require_ready_line  # workers print no ready line
    assert n0.server.port == n1.server.port == 30000 and n0.deployment is None


def test_vllm_headless_on_workers_and_explicit_log_gets_the_node_name(tmp_path):
    dep = place(load(tmp_path, VLLM))
    n0, n1 = (n.profile.server for n in dep.nodes)
    assert "--headless" not in n0.argv and n1.argv[-1] == "--headless"
    assert n1.argv[n1.argv.index("--master-addr") + 1] == "10.0.0.9"
    assert n1.argv[n1.argv.index("--master-port") + 1] == "29501"
    assert n1.argv[n1.argv.index("--node-rank") + 1] == "1"
    assert n0.log_file == "/tmp/specdebug/bigv.a_h0_2222.log"
    assert n1.log_file == "/tmp/specdebug/bigv.slurm_77_n2.log"


def test_node_env_and_node_args_apply_to_their_node_only(tmp_path):
    text = SGLANG + '[deployment.node_env.node1]\nNCCL_IB_DISABLE = "1"\n'
    text += '[deployment.node_args]\nnode1 = ["--port", "30005"]\n'
    dep = place(load(tmp_path, text))
    n0, n1 = (n.profile.server for n in dep.nodes)
    assert "NCCL_IB_DISABLE" not in n0.env and n1.env["NCCL_IB_DISABLE"] == "1"
    assert n1.port == 30005 and n1.argv.count("--port") == 1 and n0.port == 30000


def test_no_deployment_is_the_one_node_case(tmp_path):
    text = SGLANG.split("[deployment]")[0]
    profile = load(tmp_path, text)
    dep = place(profile, "gpubox")
    assert len(dep.nodes) == 1 and dep.leader.profile is profile and not dep.multi
    with pytest.raises(DeploymentError, match="give the HOST"):
        place(profile)


def test_a_host_other_than_the_leader_is_refused(tmp_path):
    profile = load(tmp_path, SGLANG)
    assert place(profile, "node0").leader.host == "node0"
    with pytest.raises(DeploymentError, match="not the deployment's leader 'node0'"):
        place(profile, "node1")


def test_leader_address_defaults_to_node0_hostname_from_ssh_config(tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host node0\n  HostName 127.0.0.2\nHost node1\n  HostName 127.0.0.3\n")
    profile = load(tmp_path, SGLANG.replace('leader_address = "10.0.0.1"\n', ""))
    dep = place(profile, ssh_config=cfg)
    assert dep.leader_address == "127.0.0.2"
    assert "127.0.0.2:20000" in dep.nodes[1].profile.server.argv


def test_flags_replace_in_place_and_append():
    argv = ["prog", "--a", "1", "--nnodes", "9", "--b"]
    assert with_flags(argv, [("--nnodes", ["2"]), ("--c", [])]) == [
        "prog",
        "--a",
        "1",
        "--nnodes",
        "2",
        "--b",
        "--c",
    ]
    assert node_args("custom", 2, 1, "x", 1) == []
    assert node_args("sglang", 2, 1, "::1", 5)[2] == ("--dist-init-addr", ["[::1]:5"])


@pytest.mark.parametrize(
    ("extra", "where", "says"),
    [
        ('nodes = ["node0", "node0"]\n', "nodes", "listed twice"),
        ("nodes = []\n", "nodes", "at least 1"),
        ("dist_init_port = 0\n", "dist_init_port", "greater than or equal to 1"),
        ('dist_init_port = "20000"\n', "dist_init_port", "wrong type"),
        ("bogus = 1\n", "bogus", "unknown key 'bogus' in [deployment] (known: dist_init_port"),
        ('leader_address = "a b"\n', "leader_address", "bad address"),
        ('[deployment.node_env.node9]\nX = "1"\n', "deployment", "'node9' is not in nodes"),
        ('[deployment.node_args]\nnode1 = ["30005"]\n', "node_args", "start with a --flag"),
        ('expect_transport = "infiniband"\n', "expect_transport", "must be 'ib' or 'ib-gdrdma'"),
        ("expect_transport = true\n", "expect_transport", "must be 'ib' or 'ib-gdrdma'"),
    ],
)
def test_bad_deployment_is_one_line_naming_file_line_field(tmp_path, extra, where, says):
    base = SGLANG
    key = extra.split(" ")[0].split("\n")[0]
    if key in ("nodes", "dist_init_port", "leader_address"):
        base = "\n".join(line for line in SGLANG.splitlines() if not line.startswith(key)) + "\n"
    text = base + extra if extra.startswith("[") else base.replace("[deployment]\n", "[deployment]\n" + extra)
    msg = error(tmp_path, text)
    assert says in msg
    assert "p.toml:" in msg and where in msg
    line = int(msg.split("p.toml:")[1].split(":")[0])
    assert where.split(".")[-1] in text.splitlines()[line - 1] or "[deployment" in text.splitlines()[line - 1]


def test_a_one_box_verb_on_a_node_reads_that_nodes_profile(tmp_path):
    import argparse

    from specdebug.verbs.common import VerbExit, node_profile

    profile = load(tmp_path, SGLANG)
    got = node_profile(argparse.Namespace(host="node1", ssh_config=None), profile)
    assert got.name == "big.node1" and got.server.log_file.endswith("big.node1.log")
    assert node_profile(argparse.Namespace(host=None, ssh_config=None), profile).name == "big.node0"
    with pytest.raises(VerbExit):
        node_profile(argparse.Namespace(host="elsewhere", ssh_config=None), profile)


def test_expect_transport_is_read(tmp_path):
    prof = load(tmp_path, SGLANG + 'expect_transport = "ib-gdrdma"\n')
    assert prof.deployment is not None and prof.deployment.expect_transport == "ib-gdrdma"
    assert load(tmp_path, SGLANG).deployment.expect_transport is None
