"""One node of a simulated multi-node server: which global ranks it holds and how a rank joins the group.

Both engines split TP over the nodes the same way (node r holds global ranks r*L .. r*L+L-1, L = world /
nnodes, one per local GPU) and go through the same init: the store rendezvous (sim.server.common.
rendezvous), Gloo's interface check, NCCL's communicator init with its lines (sim.server.common.nccl_net),
the NCCL barrier.  The call chain is named like torch's / SGLang's, so the traceback a failing rank
prints reads like a real one.  Cluster fault switches (--never-join, --nccl-timeout-after) act here.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from specdebug.sim.server.common import faults, nccl_net
from specdebug.sim.server.common.rendezvous import Group, Peer, StoreClient, StoreServer, rendezvous

DEFAULT_TIMEOUT_S = 600.0  # torch's default process-group timeout for NCCL (10 min)


@dataclass
class ClusterArgs:
    """The multi-node flags of either engine, resolved."""

    nnodes: int
    node_rank: int
    world: int  # ranks in the group, all nodes
    host: str  # the store's address (SGLang --dist-init-addr host, vLLM --master-addr)
    port: int
    timeout_s: float = DEFAULT_TIMEOUT_S
    bind: str | None = None  # this node's own address (its --host when that is one address)

    @property
    def local(self) -> int:
        return max(1, self.world // max(1, self.nnodes))

    def global_rank(self, local_index: int) -> int:
        return self.node_rank * self.local + local_index

    def view(self, rank: int) -> nccl_net.RankView:
        """The ring position of `rank` (NCCL's ring over global ranks in order)."""
        n = self.world

        def who(r: int) -> tuple[int, int, int]:
            return r, r % self.local, r // self.local

        return nccl_net.RankView(
            rank, n, rank % self.local, rank // self.local, who((rank + 1) % n), who((rank - 1) % n)
        )


def bind_address(host: str | None) -> str | None:
    """A node's --host, when it names one address, is where its ranks' sockets come from."""
    if not host or host in ("0.0.0.0", "::", "localhost"):
        return None
    try:
        socket.inet_aton(host)
    except OSError:
        return None
    return host


class RankInit:
    """One rank's init_distributed_environment on a cluster; keeps the store connection alive after."""

    def __init__(self, cluster: ClusterArgs, rank: int, env: dict[str, str], raw: Callable[[str], object]):
        self.cluster = cluster
        self.rank = rank  # global
        self.env = env
        self.raw = raw  # prints one NCCL line as NCCL does (stdout, no log prefix)
        self.client: StoreClient | None = None
        self.group: Group | None = None
        self.server: StoreServer | None = None

    def run(self, never_join: bool = False) -> Group:
        """SGLang's order: the store rendezvous, then (same call) the NCCL communicator."""
        group = self.join(never_join)
        self.init_nccl()
        return group

    def join(self, never_join: bool = False) -> Group:
        """torch.distributed.init_process_group(tcp://...): blocks until every rank is in the store."""
        if never_join:
            while True:  # --never-join: stuck before the rendezvous (a node stuck or pointed elsewhere)
                time.sleep(3600)
        c = self.cluster
        me = Peer(self.rank, c.node_rank, c.bind or "127.0.0.1", os.getpid(), socket.gethostname())
        self.group, self.client, self.server = rendezvous(
            me, c.world, c.host, c.port, c.timeout_s, bind=c.bind
        )
        return self.group

    def init_nccl(self) -> None:
        """Gloo's device, then NCCL's communicator init and its lines; a failure leaves the peers waiting."""
        c, group, client = self.cluster, self.group, self.client
        assert group is not None and client is not None, "join() first"
        ifs = nccl_net.interfaces()
        printer = nccl_net.NcclPrinter(
            self.env, socket.gethostname(), os.getpid(), threading.get_native_id(), c.view(self.rank).dev
        )
        try:
            nccl_net.gloo_check(self.env, ifs)
            nccl_net.comm_init_lines(self.env, c.view(self.rank), group.comm_id, printer, ifs)
        except nccl_net.NcclInitError as exc:
            self._print(printer.lines)
            client.nccl_done(False)
            if exc.kind == "gloo":
                raise RuntimeError(exc.message) from None
            raise faults.DistBackendError(exc.message) from None
        self._print(printer.lines[: printer.split])
        client.nccl_done(True)  # the channels connect only once every peer is there
        self._print(printer.lines[printer.split :])

    def _print(self, lines: list[str]) -> None:
        for line in lines:
            self.raw(line)

    def watchdog_timeout(self) -> None:
        """--nccl-timeout-after: the watchdog's lines on this rank, then the process goes down (SIGABRT)."""
        ms = int(self.cluster.timeout_s * 1000)
        for line in nccl_net.watchdog_lines(self.rank, ms):
            self.raw(line)
        self.raw(
            "terminate called after throwing an instance of 'c10::DistBackendError'\n"
            f"  what():  [PG ID 2 PG GUID 3 Rank {self.rank}] Process group watchdog thread terminated with "
            "exception: Watchdog caught collective operation timeout"
        )
        os.abort()


def start_watchdog_fault(init: RankInit, after_s: float | None) -> None:
    if after_s is None:
        return

    def fire() -> None:
        time.sleep(after_s)
        init.watchdog_timeout()

    threading.Thread(target=fire, name="nccl-watchdog", daemon=True).start()
