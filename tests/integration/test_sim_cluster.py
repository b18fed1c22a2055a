"""The sim as a 2-node SGLang cluster on loopback: two real processes trees, node 0 on 127.0.0.2, node 1
on 127.0.0.3, rendezvousing over TCP at node 0's --dist-init-addr.

What a multi-node tool must see: node 1 waits at `Init parallel begin.` until node 0 joins; node 0
serves the API and prints the ready line, node 1 only SGLang's dummy /health; each rank prints NCCL's
lines by its own env (IB by default, Socket with NCCL_IB_DISABLE=1); and the failure switches (a node
that never joins, a wrong NCCL_SOCKET_IFNAME, a node that dies after ready, an NCCL watchdog timeout).
Every sim runs in its own session and is killed as a group (LocalSim.stop) whatever the outcome.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from specdebug.sim.box.local import LocalSim, children_titles, free_port, pid_alive, start_local_sim
from specdebug.sim.server.vllm.args import DEFAULT_VERSION

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs Linux /proc")

NODE0, NODE1 = "127.0.0.2", "127.0.0.3"
TIME_SCALE = 0.01


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "SPT_NOENV"))}
    return env | extra


@contextmanager
def cluster(
    tmp: Path, tp: int = 2, *, env0: dict[str, str] | None = None, env1: dict[str, str] | None = None,
    args0: tuple[str, ...] = (), args1: tuple[str, ...] = (), start0: bool = True, engine: str = "sglang",
) -> Iterator[tuple[LocalSim | None, LocalSim, str]]:  # fmt: skip
    """Node 1 first (as the engines' docs advise: workers first, the leader last), then node 0.
    SGLang: `--tp N --nnodes 2 --dist-init-addr A`; vLLM: `serve M -tp N --nnodes 2 --master-addr --master-port`
    and `--headless` on node 1."""
    port = free_port(NODE0)
    dist = f"{NODE0}:{port}"
    common = ["--tp", str(tp), "--nnodes", "2", "--dist-init-addr", dist]
    if engine == "vllm":
        common = ["--engine", "vllm", "serve", "m", "-tp", str(tp), "--nnodes", "2", "--master-addr", NODE0]
        common += ["--master-port", str(port)]
        args1 = ("--headless", *args1)
    sims: list[LocalSim] = []
    files = [(tmp / "node0.out").open("wb"), (tmp / "node1.out").open("wb")]
    try:
        n1 = start_local_sim(
            [*common, "--node-rank", "1", *args1], log_file=tmp / "node1.log", host=NODE1,
            time_scale=TIME_SCALE, env=env1 or clean_env(), stdout=files[1],
        )  # fmt: skip
        sims.append(n1)
        n0 = None
        if start0:
            n0 = start_local_sim(
                [*common, "--node-rank", "0", *args0], log_file=tmp / "node0.log", host=NODE0,
                time_scale=TIME_SCALE, env=env0 or clean_env(), stdout=files[0],
            )  # fmt: skip
            sims.append(n0)
        yield n0, n1, dist
    finally:
        for sim in sims:
            sim.stop()
        for f in files:
            f.close()


def out(sim: LocalSim) -> str:
    """Everything the node printed (stdout + stderr: NCCL's lines go to stdout)."""
    return sim.log_file.with_suffix(".out").read_text(errors="replace")


def status(url: str) -> int | str:
    try:
        return httpx.get(url, timeout=3).status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


def test_two_nodes_rendezvous_then_node0_serves_and_node1_answers_health(tmp_path: Path) -> None:
    env0 = clean_env(NCCL_DEBUG="INFO", SPT_NOENV="1")
    env1 = clean_env(NCCL_DEBUG="INFO", SPT_NOENV="1", NCCL_IB_DISABLE="1")
    with cluster(tmp_path, tp=4, env0=env0, env1=env1, start0=False) as (_, n1, dist):
        n1.wait_for(lambda: n1.log_text().count("Init parallel begin.") == 2, 30)
        time.sleep(1.0)  # node 1 alone: blocked at the init milestone, for as long as node 0 is missing
        assert "Init parallel ends" not in n1.log_text() and "Load weight begin" not in n1.log_text()
        with (tmp_path / "node0.out").open("wb") as stdout0:
            n0 = start_local_sim(
                ["--tp", "4", "--nnodes", "2", "--dist-init-addr", dist, "--node-rank", "0"],
                log_file=tmp_path / "node0.log", host=NODE0, time_scale=TIME_SCALE, env=env0, stdout=stdout0,
            )  # fmt: skip
        try:
            side0 = n0.wait_ready(60)
            side1 = n1.wait_ready(60)
            # node 0: the API, the ready line; node 1: SGLang's dummy health server, never the ready line
            assert (
                side0["ready_line"] is True and "The server is fired up and ready to roll!" in n0.log_text()
            )
            assert side1["dummy_health"] is True and side1["node_rank"] == 1
            assert "fired up" not in n1.log_text()
            assert f"Starting dummy health check server at {NODE1}:{n1.port}" in n1.log_text()
            assert status(n0.url + "/health") == 200
            assert httpx.get(n0.url + "/v1/models", timeout=5).json()["data"]
            for path in ("/health", "/health_generate"):
                assert status(n1.url + path) == 200
            assert status(n1.url + "/v1/models") == 404

            # one scheduler per local GPU, TP split over the nodes; no detokenizer on node 1
            titles0 = sorted(children_titles(n0.pid).values())
            titles1 = sorted(t for t in children_titles(n1.pid).values() if "resource_tracker" not in t)
            assert [t for t in titles0 if "scheduler" in t] == [
                "sglang::scheduler_TP0",
                "sglang::scheduler_TP1",
            ]
            assert "sglang::detokenizer" in titles0
            assert titles1 == ["sglang::scheduler_TP2", "sglang::scheduler_TP3"]
            tp2 = next(pid for pid, t in children_titles(n1.pid).items() if t == "sglang::scheduler_TP2")
            environ = Path(f"/proc/{tp2}/environ").read_bytes().split(b"\0")
            assert b"NCCL_IB_DISABLE=1" in environ

            # NCCL's lines, per rank, by the node's env; the same commId on every rank
            text0, text1 = out(n0), out(n1)
            assert "NCCL INFO Using network IB" in text0 and "Using network Socket" not in text0
            assert "NCCL INFO Using network Socket" in text1 and "Using network IB" not in text1
            assert re.search(
                r"NCCL INFO Channel 00/0 : 1\[1\] -> 2\[0\] \[send\] via NET/IB/\d/GDRDMA", text0
            )
            assert re.search(
                r"NCCL INFO Channel 00/0 : 3\[1\] -> 0\[0\] \[receive\] via NET/IB/\d/GDRDMA", text0
            )
            assert "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC" in text0
            assert "NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/Socket/0" in text1
            assert "NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/IPC" in text1
            done = re.findall(r"rank (\d) nranks 4 .* commId (0x[0-9a-f]+) - Init COMPLETE", text0 + text1)
            assert sorted(r for r, _ in done) == ["0", "1", "2", "3"]
            assert len({c for _, c in done}) == 1
            for line in re.findall(r".*NCCL INFO.*", text1):
                assert re.match(r"^\S+:\d+:\d+ \[[01]\] NCCL INFO ", line), line
        finally:
            n0.stop()


def test_a_node_that_never_joins_leaves_node0_waiting_until_dist_timeout(tmp_path: Path) -> None:
    with cluster(tmp_path, args0=("--dist-timeout", "2"), args1=("--never-join",)) as (n0, n1, _):
        assert n0 is not None
        assert (
            n0.wait_exit(40) != 0
        )  # the rank-0 store gives up after --dist-timeout; SGLang's sigquit kills the tree
        text = n0.log_text()
        assert (
            "torch.distributed.DistStoreError: Timed out after 3 seconds waiting for clients. 1/2 clients joined."
            in text
        )
        assert "Received sigquit from a child process. It usually means the child failed." in text
        assert "Init parallel ends" not in text
        assert n1.proc.poll() is None and "Init parallel ends" not in n1.log_text()  # still stuck, alive


def test_a_node_without_its_rendezvous_host_times_out_connecting(tmp_path: Path) -> None:
    with cluster(tmp_path, args1=("--dist-timeout", "1"), start0=False) as (_, n1, dist):
        assert n1.wait_exit(40) != 0
        host, port = dist.split(":")
        assert (
            f"torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying to "
            f"connect to ({host}, {port})."
        ) in n1.log_text()


def test_a_wrong_socket_interface_fails_that_node_and_leaves_the_other_at_init(tmp_path: Path) -> None:
    env1 = clean_env(NCCL_DEBUG="WARN", NCCL_SOCKET_IFNAME="nosuch0")
    with cluster(tmp_path, env1=env1) as (n0, n1, _):
        assert n0 is not None
        assert n1.wait_exit(40) != 0
        assert "bootstrap.cc:66 NCCL WARN Bootstrap : no socket interface found" in out(n1)
        text = n1.log_text()
        assert (
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
            in text
        )
        assert (
            "ncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found"
            in text
        )
        time.sleep(0.5)
        assert (
            n0.proc.poll() is None and "Init parallel ends" not in n0.log_text()
        )  # NCCL init waits for its peer


def test_a_node_that_dies_after_ready_leaves_node0_serving(tmp_path: Path) -> None:
    with cluster(tmp_path, args1=("--die-after-ready", "1")) as (n0, n1, _):
        assert n0 is not None
        n0.wait_ready(60)
        assert n1.wait_exit(30) != 0  # SIGKILLed, with its schedulers
        side1 = n1.sidecar()
        assert side1["state"] == "ready" and side1["dummy_health"] is True  # it was up before it died
        n1.wait_for(lambda: not any(pid_alive(p) for p in side1["workers"].values()), 60)
        assert status(n1.url + "/health") != 200
        assert status(n0.url + "/health") == 200 and n0.proc.poll() is None  # SGLang's node 0 does not exit
        body = {"model": "m", "prompt": "hi", "max_tokens": 4}
        assert httpx.post(n0.url + "/v1/completions", json=body, timeout=30).status_code == 200
        assert "NCCL INFO" not in out(n0) + out(n1)  # no NCCL_DEBUG: NCCL says nothing


def test_an_nccl_watchdog_timeout_on_one_rank(tmp_path: Path) -> None:
    with cluster(tmp_path, args1=("--nccl-timeout-after", "0.5", "--dist-timeout", "30")) as (n0, n1, _):
        assert n0 is not None
        n0.wait_ready(60)
        n1.wait_ready(60)
        n1.wait_for(lambda: "Watchdog caught collective operation timeout" in out(n1), 60)
        text = out(n1)
        assert re.search(
            r"\[rank1\]:\[E\d{3,4} [\d:.]+ ProcessGroupNCCL.cpp:616\] \[Rank 1\] Watchdog caught collective operation "
            r"timeout: WorkNCCL\(SeqNum=32, OpType=ALLREDUCE, .*Timeout\(ms\)=30000\) ran for 30031 milliseconds",
            text,
        )
        assert "last enqueued NCCL work: 32, last completed NCCL work: 31." in text
        n1.wait_for(lambda: not [t for t in children_titles(n1.pid).values() if "scheduler" in t], 60)
        # the rank aborted; node 1's dummy server (nothing watches its schedulers) still answers 200
        assert status(n1.url + "/health") == 200
        assert status(n0.url + "/health") == 200


def test_vllm_two_nodes_head_serves_and_the_headless_node_runs_workers_only(tmp_path: Path) -> None:
    env1 = clean_env(NCCL_DEBUG="INFO", NCCL_NET_GDR_LEVEL="LOC")
    with cluster(tmp_path, tp=4, env0=clean_env(NCCL_DEBUG="INFO"), env1=env1, engine="vllm") as (
        n0,
        n1,
        dist,
    ):
        assert n0 is not None
        n0.wait_ready(60)
        side1 = n1.wait_ready(60)
        assert side1["headless"] is True and side1["node_rank"] == 1
        assert status(n0.url + "/health") == 200
        assert status(n1.url + "/health") != 200  # a headless node has no API server
        text1 = n1.log_text()
        assert (
            f"[serve.py:216] Launching vLLM (v{DEFAULT_VERSION}) headless multiproc executor, with head node address "
            f"{dist} for torch.distributed process group."
        ) in text1
        assert "Application startup complete." not in text1
        assert (
            "(APIServer pid=" not in text1 and "non-default args" not in text1
        )  # run_headless decorates nothing
        titles0 = sorted(t for t in children_titles(n0.pid).values() if t.startswith("VLLM::"))
        titles1 = sorted(t for t in children_titles(n1.pid).values() if t.startswith("VLLM::"))
        assert titles0 == ["VLLM::EngineCore"] and titles1 == ["VLLM::Worker_TP2", "VLLM::Worker_TP3"]
        core = next(pid for pid, t in children_titles(n0.pid).items() if t == "VLLM::EngineCore")
        assert sorted(children_titles(core).values()) == ["VLLM::Worker_TP0", "VLLM::Worker_TP1"]
        assert "rank 2 in world size 4 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 2" in text1
        o0, o1 = out(n0), out(n1)
        assert "NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA" in o0
        assert "NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0" in o1
        assert "GDRDMA" not in o1  # NCCL_NET_GDR_LEVEL=LOC on node 1: IB without GPUDirect RDMA
        done = re.findall(r"rank (\d) nranks 4 .* commId (0x[0-9a-f]+) - Init COMPLETE", o0 + o1)
        assert sorted(r for r, _ in done) == ["0", "1", "2", "3"] and len({c for _, c in done}) == 1


def test_vllm_headless_worker_death_ends_that_node_and_the_head_keeps_serving(tmp_path: Path) -> None:
    args1 = ("--nccl-timeout-after", "0.5")
    with cluster(tmp_path, engine="vllm", args1=args1) as (n0, n1, _):
        assert n0 is not None
        n0.wait_ready(60)
        assert n1.wait_exit(40) != 0  # the executor's inline monitor shuts the node down
        assert "[Rank 1] Watchdog caught collective operation timeout" in out(n1)
        assert "Worker proc VllmWorker-1 died unexpectedly, shutting down executor." in n1.log_text()
        assert status(n0.url + "/health") == 200 and n0.proc.poll() is None


def test_vllm_a_headless_node_that_dies_after_ready_leaves_the_head_serving(tmp_path: Path) -> None:
    with cluster(tmp_path, engine="vllm", args1=("--die-after-ready", "1")) as (n0, n1, _):
        assert n0 is not None
        n0.wait_ready(60)
        assert n1.wait_exit(40) == -9  # SIGKILLed with its workers
        side1 = n1.sidecar()
        assert side1["state"] == "ready"
        n1.wait_for(lambda: not any(pid_alive(p) for p in side1["workers"].values()), 60)
        assert status(n0.url + "/health") == 200 and n0.proc.poll() is None


def test_vllm_a_headless_node_that_never_joins_fails_the_head_after_the_timeout(tmp_path: Path) -> None:
    args0 = ("--dist-timeout", "2")
    with cluster(tmp_path, engine="vllm", args0=args0, args1=("--never-join",)) as (n0, n1, _):
        assert n0 is not None
        assert n0.wait_exit(40) != 0
        text = n0.log_text()
        assert "WorkerProc failed to start." in text
        assert (
            "torch.distributed.DistStoreError: Timed out after 3 seconds waiting for clients. 1/2 clients joined."
            in text
        )
        assert n1.proc.poll() is None and "Starting to load model" not in n1.log_text()
