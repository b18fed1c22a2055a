"""The cluster's rendezvous, for real over TCP: what torch.distributed's TCPStore does at init.

Why real: a multi-node server blocks at its init milestone until every rank of every node has
joined; a tool that watches a deployment must see exactly that (a node that never comes leaves the
others waiting until --dist-timeout).  How: global rank 0 (on node 0) hosts the store at the
dist-init address (SGLang's --dist-init-addr, vLLM's --master-addr/--master-port); every rank,
rank 0 included, connects, says who it is (JSON lines) and waits for the word that all `world`
ranks are there.  Then a second barrier stands for NCCL's communicator init: each rank reports
whether its bootstrap worked; a rank whose NCCL failed leaves the others waiting, as NCCL does.

Failures read as torch prints them (torch/csrc/distributed/c10d/TCPStore.cpp, socket.cpp):
  master, not everyone came:  `DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.`
  client, no master:          `DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (H, P).`
  client, master went away:   `DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. ...`
  master, port taken:         `DistNetworkError: The server socket has failed to listen on any local network address. ...`
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from specdebug.sim.server.common.faults import DistNetworkError, DistStoreError

CONNECT_RETRY_S = 0.2
LINE_LIMIT = 1 << 20


@dataclass
class Peer:
    """What one rank told the store: its global rank, node, address and process."""

    rank: int
    node: int
    addr: str
    pid: int
    host: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peer:
        return cls(
            int(data["rank"]), int(data["node"]), str(data["addr"]), int(data["pid"]), str(data["host"])
        )


@dataclass
class Group:
    """The joined group as every rank sees it after the first barrier."""

    comm_id: str
    peers: dict[int, Peer] = field(default_factory=dict)

    def node_of(self, rank: int) -> int:
        return self.peers[rank].node


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall((json.dumps(msg) + "\n").encode())


class _Lines:
    """JSON lines from a socket; EOF (or a reset) is None."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def read(self) -> dict[str, Any] | None:
        while b"\n" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return None
            if not chunk or len(self.buf) > LINE_LIMIT:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None


class StoreServer:
    """Rank 0's store: counts joins, releases both barriers, times out like TCPStore's master."""

    def __init__(self, host: str, port: int, world: int, timeout_s: float):
        self.world = world
        self.timeout_s = timeout_s
        self.comm_id = f"0x{secrets.randbits(64):016x}"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as exc:
            self.sock.close()
            raise DistNetworkError(
                "The server socket has failed to listen on any local network address. "
                f"port: {port}, useIpv6: false, code: -{exc.errno or 98}, name: EADDRINUSE, "
                f"message: {(exc.strerror or 'address already in use').lower()}"
            ) from None
        self.sock.listen(64)
        self.lock = threading.Lock()
        self.joined: dict[int, tuple[socket.socket, dict[str, Any]]] = {}
        self.nccl: dict[int, bool] = {}
        self.released = False
        self.timed_out = False
        self.started = time.monotonic()
        threading.Thread(target=self._accept, name="tcpstore-accept", daemon=True).start()
        threading.Thread(target=self._deadline, name="tcpstore-timeout", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), name="tcpstore-client", daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        lines = _Lines(conn)
        rank = -1
        while True:
            msg = lines.read()
            if msg is None:
                return  # a rank that goes after init is noticed by no one (until its next collective)
            op = msg.get("op")
            with self.lock:
                if op == "join" and not self.timed_out:
                    rank = int(msg["rank"])
                    self.joined[rank] = (conn, msg)
                    if len(self.joined) == self.world and not self.released:
                        self.released = True
                        peers = {str(r): m for r, (_, m) in self.joined.items()}
                        for c, _ in self.joined.values():
                            self._try_send(c, {"op": "go", "comm_id": self.comm_id, "peers": peers})
                elif op == "nccl" and rank >= 0:
                    self.nccl[rank] = bool(msg.get("ok"))
                    if len(self.nccl) == self.world and all(self.nccl.values()):
                        for c, _ in self.joined.values():
                            self._try_send(c, {"op": "nccl_go"})

    @staticmethod
    def _try_send(conn: socket.socket, msg: dict[str, Any]) -> None:
        try:
            _send(conn, msg)
        except OSError:
            pass

    def _deadline(self) -> None:
        time.sleep(self.timeout_s)
        with self.lock:
            if self.released:
                return
            self.timed_out = True
            for rank, (conn, _) in self.joined.items():
                if rank == 0:  # the master's own client raises; the others lose the store
                    self._try_send(conn, {"op": "timeout", "joined": len(self.joined)})
        time.sleep(0.05)
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            for conn, _ in self.joined.values():
                if conn is not None:
                    try:
                        conn.shutdown(socket.SHUT_RDWR)
                        conn.close()
                    except OSError:
                        pass


class StoreClient:
    """One rank's connection to the store: join, wait for the group, report NCCL, wait for the rest."""

    def __init__(self, host: str, port: int, timeout_s: float, bind: str | None = None):
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.sock = self._connect(bind)
        self.lines = _Lines(self.sock)

    def _connect(self, bind: str | None) -> socket.socket:
        deadline = time.monotonic() + self.timeout_s
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                if bind:
                    sock.bind((bind, 0))
                sock.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))
                sock.connect((self.host, self.port))
                sock.settimeout(None)
                return sock
            except OSError:
                sock.close()
            if time.monotonic() >= deadline:
                raise DistNetworkError(
                    f"The client socket has timed out after {int(self.timeout_s * 1000)}ms while trying to "
                    f"connect to ({self.host}, {self.port})."
                )
            time.sleep(CONNECT_RETRY_S)

    def _recv(self) -> dict[str, Any]:
        msg = self.lines.read()
        if msg is None:
            raise DistNetworkError(
                "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"
            )
        return msg

    def join(self, me: Peer, world: int) -> Group:
        _send(self.sock, {"op": "join", **me.__dict__})
        msg = self._recv()
        if msg.get("op") == "timeout":
            raise DistStoreError(
                f"Timed out after {int(self.timeout_s) + 1} seconds waiting for clients. "
                f"{msg.get('joined', 0)}/{world} clients joined."
            )
        peers = {int(r): Peer.from_dict(p) for r, p in dict(msg.get("peers", {})).items()}
        return Group(str(msg.get("comm_id", "0x0")), peers)

    def nccl_done(self, ok: bool) -> None:
        """Report this rank's NCCL init; when ok, wait until every rank's is (a failed peer: forever)."""
        _send(self.sock, {"op": "nccl", "ok": ok})
        if ok:
            while self._recv().get("op") != "nccl_go":
                pass


def rendezvous(
    me: Peer, world: int, host: str, port: int, timeout_s: float, bind: str | None = None
) -> tuple[Group, StoreClient, StoreServer | None]:
    """Join the group (rank 0 first starts the store); returns the group and the live connection."""
    server = StoreServer(host, port, world, timeout_s) if me.rank == 0 else None
    client = StoreClient(host, port, timeout_s, bind=bind)
    return client.join(me, world), client, server
