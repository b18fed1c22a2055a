"""The simulated cluster's rendezvous (sim.server.common.rendezvous) over real loopback TCP, in threads:
the group forms only with every rank, and each way it fails reads as torch's error."""

from __future__ import annotations

import socket
import threading

import pytest

from specdebug.sim.box.local import free_port
from specdebug.sim.server.common.faults import DistNetworkError, DistStoreError
from specdebug.sim.server.common.rendezvous import Peer, StoreClient, rendezvous

HOST = "127.0.0.1"


def peer(rank: int) -> Peer:
    return Peer(rank=rank, node=rank, addr=HOST, pid=100 + rank, host="h")


def test_the_group_forms_with_every_rank_and_the_nccl_barrier_releases_all() -> None:
    port = free_port(HOST)
    got: dict[int, object] = {}

    def rank(r: int) -> None:
        group, client, server = rendezvous(peer(r), 3, HOST, port, 10.0)
        client.nccl_done(True)
        got[r] = (group.comm_id, tuple(sorted(group.peers)), group.node_of(2))
        if server is not None:
            server.close()

    threads = [threading.Thread(target=rank, args=(0,))]
    threads[0].start()
    threads += [threading.Thread(target=rank, args=(r,)) for r in (1, 2)]
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(20)
    assert len(got) == 3 and len(set(got.values())) == 1
    comm_id, ranks, node = next(iter(got.values()))  # type: ignore[misc]
    assert ranks == (0, 1, 2) and node == 2 and comm_id.startswith("0x")


def test_rank0_times_out_waiting_for_clients_as_tcpstore_does() -> None:
    port = free_port(HOST)
    with pytest.raises(
        DistStoreError, match=r"^Timed out after 1 seconds waiting for clients\. 1/2 clients joined\.$"
    ):
        rendezvous(peer(0), 2, HOST, port, 0.5)


def test_a_client_without_its_master_times_out_connecting() -> None:
    port = free_port(HOST)
    msg = rf"^The client socket has timed out after 300ms while trying to connect to \({HOST}, {port}\)\.$"
    with pytest.raises(DistNetworkError, match=msg):
        StoreClient(HOST, port, 0.3)


def test_a_taken_port_fails_the_master_to_listen() -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(
            DistNetworkError, match="The server socket has failed to listen on any local network"
        ):
            rendezvous(peer(0), 2, HOST, port, 0.5)
