"""The simulated cluster's pure logic: its multi-node flags (both engines' forms), and the NCCL/Gloo lines
a rank's env chooses with the errors a wrong pin gives (sim.server.common.nccl_net, on made-up interfaces)."""

from __future__ import annotations

import re

import pytest

from specdebug.sim.server.common import nccl_net
from specdebug.sim.server.common.cluster import ClusterArgs
from specdebug.sim.server.common.nccl_net import NcclInitError, NcclPrinter

IFS = [("lo", "127.0.0.1"), ("eth0", "10.0.0.5"), ("docker0", "172.17.0.1"), ("ib0", "10.1.0.5")]


def lines(env: dict[str, str], rank: int = 1, world: int = 4, nnodes: int = 2) -> list[str]:
    c = ClusterArgs(nnodes=nnodes, node_rank=rank // (world // nnodes), world=world, host="127.0.0.2", port=1)
    printer = NcclPrinter(env, "h", 10, 11, c.view(rank).dev)
    nccl_net.comm_init_lines(env, c.view(rank), "0xabc", printer, IFS)
    return printer.lines


@pytest.mark.parametrize(
    "spec, names",
    [
        ("eth", ["eth0"]),
        ("=eth", []),
        ("=eth0", ["eth0"]),
        ("^docker,lo", ["eth0", "ib0"]),
        ("^=lo", ["eth0", "docker0", "ib0"]),
        ("eth0:1,ib", ["eth0", "ib0"]),
    ],
)
def test_interface_lists_follow_nccl_syntax(spec: str, names: list[str]) -> None:
    assert nccl_net.match_names(spec, [n for n, _ in IFS]) == names


def test_default_interface_prefers_ib_then_not_lo_or_docker_then_lo() -> None:
    assert nccl_net.pick_interface({}, IFS) == ("ib0", "10.1.0.5")
    assert nccl_net.pick_interface({}, IFS[:3]) == ("eth0", "10.0.0.5")
    assert nccl_net.pick_interface({}, IFS[:1]) == ("lo", "127.0.0.1")
    assert nccl_net.pick_interface({"NCCL_SOCKET_IFNAME": "nosuch"}, IFS) is None


def test_nothing_without_nccl_debug_info() -> None:
    assert lines({}) == []
    assert lines({"NCCL_DEBUG": "WARN"}) == []
    assert lines({"NCCL_DEBUG": "VERSION"}, rank=0) == ["h:10:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]


def test_ib_with_gdrdma_by_default_and_p2p_inside_the_node() -> None:
    got = lines({"NCCL_DEBUG": "INFO"}, rank=1)
    assert "h:10:11 [1] NCCL INFO Bootstrap : Using ib0:10.1.0.5<0>" in got
    assert "h:10:11 [1] NCCL INFO Using network IB" in got
    assert "h:10:11 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA" in got
    assert "h:10:11 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/IB/1/GDRDMA" not in got
    assert got[-1] == (
        "h:10:11 [1] NCCL INFO ncclCommInitRank comm 0x55d0c8a01000 rank 1 nranks 4 cudaDev 1 nvmlDev 1 "
        "busId 2000 commId 0xabc - Init COMPLETE"
    )
    assert "h:10:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC" in lines(
        {"NCCL_DEBUG": "INFO"}, rank=0
    )


@pytest.mark.parametrize(
    "env, network, via",
    [
        ({"NCCL_IB_DISABLE": "1"}, "Socket", "NET/Socket/0"),
        ({"NCCL_NET": "Socket"}, "Socket", "NET/Socket/0"),
        ({"NCCL_IB_HCA": "mlx4"}, "Socket", "NET/Socket/0"),
        ({"NCCL_IB_HCA": "=mlx5_1"}, "IB", "NET/IB/0/GDRDMA"),
        ({"NCCL_NET_GDR_LEVEL": "LOC"}, "IB", "NET/IB/1"),
    ],
)
def test_the_env_chooses_the_network(env: dict[str, str], network: str, via: str) -> None:
    got = lines({"NCCL_DEBUG": "INFO", **env}, rank=1)
    assert f"h:10:11 [1] NCCL INFO Using network {network}" in got
    assert f"h:10:11 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via {via}" in got


def test_subsys_filter() -> None:
    got = lines({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "NET"}, rank=1)
    assert got and all("NET" in line for line in got)
    got = lines({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^ENV", "NCCL_PROTO": "LL"}, rank=1)
    assert not any("set by environment" in line for line in got) and any(
        "Init COMPLETE" in line for line in got
    )


def test_a_wrong_socket_interface_is_nccls_bootstrap_error() -> None:
    env = {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "nosuch0"}
    c = ClusterArgs(nnodes=2, node_rank=0, world=2, host="127.0.0.2", port=1)
    printer = NcclPrinter(env, "h", 10, 11, 0)
    with pytest.raises(NcclInitError) as err:
        nccl_net.comm_init_lines(env, c.view(0), "0x1", printer, IFS)
    assert printer.lines == ["h:10:11 [0] bootstrap.cc:66 NCCL WARN Bootstrap : no socket interface found"]
    assert err.value.message.endswith(
        "ncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found"
    )


def test_a_wrong_gloo_interface_is_gloos_enforce_failure() -> None:
    nccl_net.gloo_check({"GLOO_SOCKET_IFNAME": "eth0"}, IFS)
    with pytest.raises(NcclInitError, match=r"ifa != nullptr. Unable to find address for: eth9"):
        nccl_net.gloo_check({"GLOO_SOCKET_IFNAME": "eth9"}, IFS)


def test_watchdog_lines_name_the_rank_and_the_work() -> None:
    got = nccl_net.watchdog_lines(3, 600000, when=0.0)
    assert got[0].startswith("[rank3]:[E") and "ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught" in got[0]
    assert "Timeout(ms)=600000) ran for 600031 milliseconds before timing out." in got[0]
    assert "last enqueued NCCL work: 32, last completed NCCL work: 31." in got[1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tp", "3", "--nnodes", "2"], "tp_size=3 must be divisible by nnodes=2"),
        (["--tp", "2", "--nnodes", "2", "--node-rank", "2"], "node_rank=2 must be in [0, nnodes=2)"),
        (["--tp", "2", "--nnodes", "2", "--dist-init-addr", "10.0.0.1"], "must be HOST:PORT"),
    ],
)
def test_bad_multi_node_flags_fail_at_startup(argv: list[str], message: str) -> None:
    from specdebug.sim.server.sglang.options import parse_args

    with pytest.raises(ValueError, match=re.escape(message)):
        parse_args(argv)


def test_cluster_of_reads_sglangs_and_vllms_forms() -> None:
    from specdebug.sim.server.sglang.options import cluster_of, parse_args
    from specdebug.sim.server.vllm.args import cluster_of as vllm_cluster_of
    from specdebug.sim.server.vllm.args import local_ranks, parse_vllm_args

    s = parse_args(
        ["--tp", "4", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "127.0.0.2:5000"]
    ).server
    c = cluster_of(s)
    assert c is not None and (c.host, c.port, c.world, c.local, c.global_rank(1), c.timeout_s) == (
        "127.0.0.2", 5000, 4, 2, 3, 600.0,
    )  # fmt: skip
    assert cluster_of(parse_args(["--tp", "2"]).server) is None
    v = parse_vllm_args(
        [
            "serve",
            "m",
            "-tp",
            "4",
            "--nnodes",
            "2",
            "--node-rank",
            "1",
            "--headless",
            "--master-addr",
            "127.0.0.2",
        ]
    )
    vc = vllm_cluster_of(v)
    assert vc is not None and (vc.host, vc.port) == ("127.0.0.2", 29501) and local_ranks(v) == [2, 3]
    with pytest.raises(ValueError, match="--headless"):
        parse_vllm_args(["serve", "m", "-tp", "2", "--nnodes", "2", "--node-rank", "1"])
