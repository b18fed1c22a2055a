"""The NCCL transport proof on the line shapes NCCL prints (shared/notes/multinode.md section 2.2):
every inter-node edge with its `via`, one verdict per deployment, `unproven` when lines are missing,
and the environ's intent checked against what was seen."""

from __future__ import annotations

from specdebug.core.deployment.nccl import HINT, classify, parse_node, prove_transport
from specdebug.core.deployment.nccl_intent import matches_list

COMM = "0x86078063f5a85ee6"


def rank_lines(
    host: str, pid: int, rank: int, dev: int, net: str, channels: list[str], nranks: int = 4
) -> list[str]:
    p = f"{host}:{pid}:{pid + 7} [{dev}] NCCL INFO"
    lines = [
        f"{p} Bootstrap : Using eth0:10.0.0.{1 + rank // 2}<0>",
        f"{p} NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
        f"{p} Using network {net}",
        *(f"{p} {c}" for c in channels),
        f"{p} Connected all rings",
        f"{p} ncclCommInitRank comm 0x55d0c1a0 rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} "
        f"busId 1{dev}000 commId {COMM} - Init COMPLETE",
    ]
    return lines


def two_nodes(
    via01: str = "NET/IB/0/GDRDMA", via1: str | None = None, net1: str = "IB"
) -> dict[str, list[str]]:
    """Ranks 0,1 on node0 and 2,3 on node1; 1->2 and 3->0 cross the nodes."""
    via1 = via1 or via01
    node0 = rank_lines("gpu-a", 100, 0, 0, "IB", ["Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"])
    node0 += rank_lines("gpu-a", 101, 1, 1, "IB", [f"Channel 00/0 : 1[1] -> 2[0] [send] via {via01}"])
    node1 = rank_lines("gpu-b", 200, 2, 0, net1, ["Channel 00/0 : 2[0] -> 3[1] via P2P/IPC"])
    node1 += rank_lines("gpu-b", 201, 3, 1, net1, [f"Channel 00/0 : 3[1] -> 0[0] [send] via {via1}"])
    return {"node0": node0, "node1": node1}


def test_classify_the_via_forms():
    assert classify("NET/IB/0/GDRDMA") == "ib-gdrdma"
    assert classify("NET/IB/1(3)/GDRDMA/Shared") == "ib-gdrdma"
    assert classify("NET/IB/0") == "ib"
    assert classify("NET/Socket/0") == "socket"
    assert classify("NET/Libfabric/0/GDRDMA") == "other"
    assert classify("P2P/IPC/read") == "p2p" and classify("SHM/direct/direct") == "shm"


def test_every_inter_node_edge_with_its_via_and_the_verdict():
    proof = prove_transport(two_nodes())
    assert proof.verdict == "ib-gdrdma", proof.reason
    pairs = sorted((e.src, e.dst, e.src_node, e.dst_node, e.via) for e in proof.edges)
    assert pairs == [(1, 2, "node0", "node1", "NET/IB/0/GDRDMA"), (3, 0, "node1", "node0", "NET/IB/0/GDRDMA")]
    assert all(e.comm == COMM and e.inter_node for e in proof.edges)  # intra-node P2P is not an edge here
    assert proof.hint is None and proof.findings == []


def test_the_worst_edge_decides():
    assert prove_transport(two_nodes(via01="NET/IB/0")).verdict == "ib"
    proof = prove_transport(two_nodes(via1="NET/Socket/0", net1="Socket"))
    assert proof.verdict == "socket" and "ib-gdrdma" in proof.reason and "socket" in proof.reason


def test_missing_lines_are_unproven_with_the_hint():
    lines = two_nodes()
    proof = prove_transport({"node0": lines["node0"], "node1": ["just a server line"]})
    assert proof.verdict == "unproven" and "node1" in proof.reason and proof.hint == HINT
    none = prove_transport({"node0": ["x"], "node1": []})
    assert none.verdict == "unproven" and none.reason.startswith("no NCCL lines") and none.hint == HINT


def test_rank_to_node_comes_from_the_log_not_the_host_name():
    lines = two_nodes()
    same = {n: [line.replace("gpu-a", "box").replace("gpu-b", "box") for line in v] for n, v in lines.items()}
    proof = prove_transport(same)  # both nodes call themselves "box" (two sims on one machine)
    assert proof.verdict == "ib-gdrdma" and len(proof.edges) == 2


def test_channels_of_an_unfinished_init_are_counted_not_lost():
    node0 = two_nodes()["node0"][:-1]  # rank 1's Init COMPLETE never printed
    info, edges, placed = parse_node("node0", node0)
    assert info.incomplete == 1 and edges[-1].comm is None and (COMM, 0) in placed


def test_ib_disabled_on_one_node_is_socket_and_explained():
    proof = prove_transport(
        two_nodes(via01="NET/Socket/0", via1="NET/Socket/0", net1="Socket"),
        environ={
            "node0": {100: {}, 101: {}},
            "node1": {200: {"NCCL_IB_DISABLE": "1"}, 201: {"NCCL_IB_DISABLE": "1"}},
        },
    )
    assert proof.verdict == "socket"
    assert any(f.startswith("node0:") and "NCCL_IB_DISABLE=1 on node1" in f for f in proof.findings)
    assert not any(f.startswith("node1:") for f in proof.findings)  # node1 asked for sockets and got them


def test_intent_mismatches_are_findings():
    env = {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=ens1", "NCCL_IB_HCA": "^mlx5_1"}
    proof = prove_transport(two_nodes(), environ={"node0": {100: env, 101: env}})
    text = "\n".join(proof.findings)
    assert (
        "node0: NCCL_IB_DISABLE=1 in PID 100's environ, but its ranks went over IB (1->2 via NET/IB/0/GDRDMA)"
        in text
    )
    assert "NCCL_SOCKET_IFNAME==ens1" in text and "interface eth0" in text
    assert "NCCL_IB_HCA=^mlx5_1" in text and "mlx5_1:1/IB" in text
    net = prove_transport(two_nodes(), environ={"node1": {200: {"NCCL_NET": "Socket"}, 201: {}}})
    assert any("NCCL_NET=Socket" in f for f in net.findings)
    assert any("differs between its workers" in f for f in net.findings)


def test_nccl_list_rules():
    assert matches_list("eth", "eth0") and not matches_list("=eth", "eth0")
    assert not matches_list("^docker,lo", "docker0") and matches_list("^docker,lo", "ib0")
    assert matches_list("mlx5_0:1", "mlx5_0:1") and not matches_list("mlx5_0:2", "mlx5_0:1")


def test_two_independent_servers_sharing_a_comm_id_are_not_edges():
    """Two one-node servers print rank 0 and 1 of a comm with the same id: placed nowhere, said so."""
    lines = {
        n: rank_lines(n, 10, 0, 0, "Socket", ["Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer"], nranks=2)
        + rank_lines(n, 11, 1, 1, "Socket", ["Channel 00/0 : 1[1] -> 0[0] via P2P/direct pointer"], nranks=2)
        for n in ("node0", "node1")
    }
    proof = prove_transport(lines)
    assert proof.verdict == "unproven" and proof.edges == []
    assert any("not one communicator" in f for f in proof.findings)


def test_the_two_ends_of_an_edge_disagreeing_is_a_finding():
    node0 = rank_lines(
        "a", 1, 0, 0, "IB", ["Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"], nranks=2
    )
    node1 = rank_lines(
        "b", 2, 1, 0, "Socket", ["Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0"], nranks=2
    )
    proof = prove_transport({"node0": node0, "node1": node1})
    assert proof.verdict == "socket"
    assert proof.reason == "1 of 2 inter-node edges went socket (as node1 printed them); the others ib-gdrdma"
    assert any(
        "its two ends disagree (node0 printed NET/IB/0/GDRDMA, node1 printed NET/Socket/0)" in f
        for f in proof.findings
    )


def ends(via_send: str, via_recv: str) -> dict[str, list[str]]:
    """One edge 0->1 across two nodes, each end printing its own line."""
    node0 = rank_lines("a", 1, 0, 7, "IB", [f"Channel 00/0 : 0[7] -> 1[0] [send] via {via_send}"], nranks=2)
    node1 = rank_lines(
        "b", 2, 1, 0, "IB", [f"Channel 00/0 : 0[7] -> 1[0] [receive] via {via_recv}"], nranks=2
    )
    return {"node0": node0, "node1": node1}


def test_each_end_prints_its_own_nic_index_and_that_is_no_finding():
    """Issue 38: on every healthy 2 x 8 run, 4 findings 'its two ends disagree (node0 printed
    NET/IB/3/GDRDMA, node1 printed NET/IB/0/GDRDMA)': the index is each end's own NIC (and a PXN
    proxy rank in parentheses, and GPUDirect RDMA each end's own GPU-NIC path)."""
    for send, recv in [
        ("NET/IB/3/GDRDMA", "NET/IB/0/GDRDMA"),
        ("NET/IB/1(3)/GDRDMA/Shared", "NET/IB/0/GDRDMA"),
        ("NET/IB/2", "NET/IB/0/GDRDMA"),  # a sender without GDR read beside a receiver with it
    ]:
        proof = prove_transport(ends(send, recv))
        assert proof.findings == [], (send, recv, proof.findings)
    worst = prove_transport(ends("NET/IB/2", "NET/IB/0/GDRDMA"))
    assert worst.verdict == "ib" and len(worst.edges) == 2  # the plain-IB end still decides the verdict


def test_nccl_230_line_shapes_and_the_older_ones():
    """NCCL 2.30 (src/transport/net_ib/init.cc, src/bootstrap.cc, src/debug.cc) and 2.21 shapes."""
    h = "gpu-a:10:11 [0]"
    lines = [
        f"{h} NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>",  # 2.24+
        f"{h} NCCL INFO Bootstrap : Using ens1:10.0.0.1<0>",  # up to 2.23
        f"{h} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>",
        f"{h} NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE ; OOB eth1:10.0.0.1<0>",  # no [RO]
        f"{h} NCCL INFO NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 context=0x1 pciPath=/x ar=1",
        f"{h} NCCL INFO NET/Socket : Using [0]eth2:10.0.0.1<0> [1]eth3:10.0.1.1<0>",
        "",  # NCCL puts a newline before every WARN
        f"[2026-12-01 10:00:00] {h} transport/net_ib/init.cc:321 (ncclIbInitDevices) NCCL WARN NET/IB : "
        "Unable to open device mlx5_9",
        f"{h} misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer",  # 2.21-2.29
    ]
    info, _, _ = parse_node("node0", lines)
    assert info.ib_devices == ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_bond_0:1/RoCE"]  # not [RO]; OOB eth0:...
    assert info.interfaces == ["eth0", "ens1", "ib0", "eth1", "eth2", "eth3"]
    assert info.warnings == [
        "NET/IB : Unable to open device mlx5_9",
        "socketProgress: Connection closed by remote peer",
    ]
    hca = prove_transport(two_nodes(), environ={"node0": {100: {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}, 101: {}}})
    assert not any("NCCL used" in f for f in hca.findings), hca.findings  # '[RO];' was a 'device' here


def test_intra_node_shm_instead_of_p2p_is_a_finding():
    lines = two_nodes()
    lines["node1"] = [line.replace("via P2P/IPC", "via SHM/direct/direct") for line in lines["node1"]]
    proof = prove_transport(lines, environ={"node1": {200: {"NCCL_P2P_DISABLE": "1"}, 201: {}}})
    assert proof.intra_node == {"node0": {"p2p": 1}, "node1": {"shm": 1}}
    assert proof.verdict == "ib-gdrdma"  # the inter-node edges are fine
    shm = [f for f in proof.findings if "SHM" in f]
    assert shm == [
        "node1: 1 of 1 intra-node channel lines went over SHM (host shared memory), not P2P "
        "(e.g. 2->3 via SHM/direct/direct): its workers' environ has NCCL_P2P_DISABLE=1"
    ]
    assert not any("SHM" in f for f in prove_transport(two_nodes()).findings)


def test_what_the_deployment_expects_fails_on_a_socket_edge_or_no_proof():
    ok = prove_transport(two_nodes(), expect="ib")
    assert ok.expected == "ib" and ok.failures == []
    assert prove_transport(two_nodes(via01="NET/IB/0"), expect="ib").failures == []
    no_gdr = prove_transport(two_nodes(via01="NET/IB/0"), expect="ib-gdrdma").failures
    assert (
        len(no_gdr) == 1 and "ib-gdrdma expected, but 2 of 2 inter-node channel lines went ib (" in no_gdr[0]
    )
    sock = prove_transport(two_nodes(via1="NET/Socket/0", net1="Socket"), expect="ib").failures
    assert sock == [
        "ib expected, but 1 of 2 inter-node channel lines went socket (printed by node1; "
        "e.g. node1 pid 201: 3->0 via NET/Socket/0)"
    ]
    blind = prove_transport({"node0": ["x"], "node1": []}, expect="ib").failures
    assert len(blind) == 1 and "transport is unproven" in blind[0] and HINT in blind[0]
    assert prove_transport(two_nodes(via1="NET/Socket/0", net1="Socket")).failures == []  # nothing expected
