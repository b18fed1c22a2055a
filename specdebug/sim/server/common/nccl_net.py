"""What NCCL and Gloo print for one rank of a multi-node group, chosen by that rank's environment.

Why: the transport an inter-node edge really uses (InfiniBand with GPUDirect RDMA, plain IB, or TCP
sockets) is only provable from NCCL's own lines, and a wrong interface pin only shows as NCCL's or
Gloo's error; a simulated cluster must print both exactly as they appear (research notes
multinode.md 2.2; NVIDIA/nccl src/init.cc, src/transport/net.cc, src/bootstrap.cc).

Shapes: `HOST:PID:TID [DEV] NCCL INFO msg` (and `HOST:PID:TID [DEV] file.cc:LINE NCCL WARN msg`),
printed only with NCCL_DEBUG=INFO (or TRACE; WARN shows the WARN lines only, VERSION the version
line), filtered by NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV; `^` inverts, ALL).  NCCL_DEBUG_FILE
is not honoured: the lines go to the server's log.  The network, per rank: IB ("4 mlx5 HCAs") unless
NCCL_IB_DISABLE=1, NCCL_NET=Socket, or NCCL_IB_HCA matching none of them; GPUDirect RDMA unless
NCCL_NET_GDR_LEVEL=LOC; the socket interface from NCCL_SOCKET_IFNAME (prefix list, `=` exact, `^`
excludes) over this machine's real interfaces, none -> `Bootstrap : no socket interface found` and
torch's DistBackendError; GLOO_SOCKET_IFNAME naming no interface -> Gloo's enforce failure.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import time
from dataclasses import dataclass

NCCL_VERSION = "2.21.5+cuda12.4"
HCAS = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
DEFAULT_SUBSYS = ("INIT", "BOOTSTRAP", "ENV")
QUIET_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")
PG_NCCL = "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"


class NcclInitError(Exception):
    """A rank's NCCL (or Gloo) init failed: `kind` is "nccl" or "gloo", `message` torch's text."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def interfaces() -> list[tuple[str, str]]:
    """This machine's interfaces with an IPv4 address, as (name, address)."""
    out: list[tuple[str, str]] = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                addr = socket.inet_ntoa(fcntl.ioctl(probe.fileno(), 0x8915, req)[20:24])  # SIOCGIFADDR
            except OSError:
                continue
            out.append((name, addr))
    finally:
        probe.close()
    return out


def match_names(spec: str, names: list[str]) -> list[str]:
    """NCCL's interface / HCA list syntax: `a,b` prefixes, `=a,b` exact, `^...` excludes; `:port` ignored."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    wanted = [w.split(":")[0] for w in spec.split(",") if w]

    def hit(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [n for n in names if hit(n) != exclude]


def pick_interface(env: dict[str, str], ifs: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The bootstrap interface NCCL picks: NCCL_SOCKET_IFNAME, else not lo/docker first, lo last."""
    spec = env.get("NCCL_SOCKET_IFNAME", "")
    names = [n for n, _ in ifs]
    if spec:
        chosen = match_names(spec, names)
    else:
        chosen = match_names("ib", names) or match_names("^docker,lo", names) or match_names("lo", names)
    addr = dict(ifs)
    return (chosen[0], addr[chosen[0]]) if chosen else None


@dataclass
class RankView:
    """One rank in the group: global rank, local GPU, node, and the ring neighbours' (rank, dev, node)."""

    rank: int
    nranks: int
    dev: int
    node: int
    next: tuple[int, int, int]
    prev: tuple[int, int, int]


class NcclPrinter:
    """Formats one rank's lines with NCCL's prefix and applies NCCL_DEBUG / NCCL_DEBUG_SUBSYS."""

    def __init__(self, env: dict[str, str], host: str, pid: int, tid: int, dev: int):
        self.level = env.get("NCCL_DEBUG", "").upper()
        subsys = env.get("NCCL_DEBUG_SUBSYS", "")
        self.invert = subsys.startswith("^")
        names = (subsys[1:] if self.invert else subsys).upper()
        self.subsys = tuple(s for s in names.split(",") if s) or DEFAULT_SUBSYS
        self.head = f"{host}:{pid}:{tid} [{dev}]"
        self.lines: list[str] = []
        self.split = 0  # lines before this are printed before the peers connect, the rest after

    def _on(self, tags: tuple[str, ...]) -> bool:
        if "ALL" in self.subsys:
            return not self.invert
        return any(t in self.subsys for t in tags) != self.invert

    def info(self, msg: str, *tags: str) -> None:
        if self.level in ("INFO", "TRACE") and self._on(tags or ("INIT",)):
            self.lines.append(f"{self.head} NCCL INFO {msg}")

    def version(self) -> None:
        if self.level in ("VERSION", "WARN", "INFO", "TRACE"):
            self.lines.append(f"{self.head} NCCL INFO NCCL version {NCCL_VERSION}")

    def warn(self, where: str, msg: str) -> None:
        if self.level in ("WARN", "INFO", "TRACE"):
            self.lines.append(f"{self.head} {where} NCCL WARN {msg}")


def _backend_error(reason: str, code: str, last: str) -> NcclInitError:
    version = NCCL_VERSION.split("+")[0]
    return NcclInitError(
        "nccl",
        f"NCCL error in: {PG_NCCL}:1970, {reason}, NCCL version {version}\n{code}\nLast error:\n{last}",
    )


def gloo_check(env: dict[str, str], ifs: list[tuple[str, str]]) -> None:
    """Gloo's device creation: GLOO_SOCKET_IFNAME must name an interface exactly."""
    name = env.get("GLOO_SOCKET_IFNAME", "")
    if name and name not in dict(ifs):
        raise NcclInitError(
            "gloo",
            "[enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
            f"Unable to find address for: {name}",
        )


def comm_init_lines(
    env: dict[str, str], view: RankView, comm_id: str, printer: NcclPrinter, ifs: list[tuple[str, str]]
) -> None:
    """A communicator's init on one rank, into `printer`; raises NcclInitError as torch would."""
    p, v = printer, view
    chosen = pick_interface(env, ifs)
    if chosen is None:
        p.warn("bootstrap.cc:66", "Bootstrap : no socket interface found")
        raise _backend_error(
            "internal error - please report this issue to the NCCL developers",
            "ncclInternalError: Internal check failed.",
            "Bootstrap : no socket interface found",
        )
    ifname, ip = chosen
    oob = f"{ifname}:{ip}<0>"
    p.info(f"Bootstrap : Using {oob}", "INIT", "BOOTSTRAP")
    if v.rank == 0:
        p.version()
    p.info("cudaDriverVersion 12040")
    for name in sorted(env):
        if name.startswith("NCCL_") and name not in QUIET_VARS:
            value = env[name]
            dot = "." if value.lstrip("-").isdigit() else ""
            p.info(f"{name} set by environment to {value}{dot}", "ENV")
    forced = env.get("NCCL_NET", "")
    hcas = list(HCAS)
    if env.get("NCCL_IB_HCA"):
        hcas = match_names(env["NCCL_IB_HCA"], hcas)
    ib = env.get("NCCL_IB_DISABLE", "0") != "1" and forced.lower() != "socket"
    if ib:
        if hcas:
            ports = " ".join(f"[{i}]{h}:1/IB" for i, h in enumerate(hcas))
            p.info(f"NET/IB : Using {ports} [RO]; OOB {oob}", "INIT", "NET")
        else:
            p.info("NET/IB : No device found.", "INIT", "NET")
            ib = False
    if forced.lower() == "ib" and not ib:
        p.warn("net.cc:721", "Error : network IB not found.")
        raise _backend_error(
            "invalid usage (run with NCCL_DEBUG=WARN for details)",
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
            "Error : network IB not found.",
        )
    if not ib:
        p.info(f"NET/Socket : Using [0]{oob}", "INIT", "NET")
    p.info(f"Using network {'IB' if ib else 'Socket'}")
    comm = f"0x{0x55D0C8A00000 + v.rank * 0x1000:x}"
    ident = (
        f"rank {v.rank} nranks {v.nranks} cudaDev {v.dev} nvmlDev {v.dev} busId {(v.dev + 1) * 0x1000:x} "
        f"commId {comm_id}"
    )
    p.info(f"ncclCommInitRank comm {comm} {ident} - Init START")
    p.split = len(p.lines)
    gdr = "" if env.get("NCCL_NET_GDR_LEVEL", "").upper() in ("LOC", "0") else "/GDRDMA"
    net = f"NET/IB/{v.dev % max(len(hcas), 1)}{gdr}" if ib else "NET/Socket/0"
    p2p_off = env.get("NCCL_P2P_DISABLE") == "1" or env.get("NCCL_P2P_LEVEL", "").upper() in ("LOC", "0")
    local = "SHM/direct/direct" if p2p_off else "P2P/IPC"
    if v.nranks > 1:
        for ch in (0, 1):
            prev_r, prev_d, prev_n = v.prev
            next_r, next_d, next_n = v.next
            if prev_n != v.node:
                p.info(
                    f"Channel {ch:02d}/0 : {prev_r}[{prev_d}] -> {v.rank}[{v.dev}] [receive] via {net}",
                    "INIT",
                    "NET",
                )
            if next_n != v.node:
                p.info(
                    f"Channel {ch:02d}/0 : {v.rank}[{v.dev}] -> {next_r}[{next_d}] [send] via {net}",
                    "INIT",
                    "NET",
                )
            else:
                p.info(
                    f"Channel {ch:02d}/0 : {v.rank}[{v.dev}] -> {next_r}[{next_d}] via {local}", "INIT", "P2P"
                )
        p.info("Connected all rings")
        p.info("Connected all trees")
    p.info(f"ncclCommInitRank comm {comm} {ident} - Init COMPLETE")


def watchdog_lines(rank: int, timeout_ms: int, seq: int = 32, when: float | None = None) -> list[str]:
    """ProcessGroupNCCL's watchdog on a collective that never completed (torch 2.x shapes)."""
    t = time.localtime(when if when is not None else time.time())
    frac = f"{int(((when or time.time()) % 1) * 1e6):06d}000"
    stamp = f"{t.tm_mon}{t.tm_mday:02d} {time.strftime('%H:%M:%S', t)}.{frac}"
    ran = timeout_ms + 31
    head = f"[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp"
    return [
        f"{head}:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        f"OpType=ALLREDUCE, NumelIn=117440512, NumelOut=117440512, Timeout(ms)={timeout_ms}) ran for {ran} "
        "milliseconds before timing out.",
        f"{head}:1785] [PG ID 2 PG GUID 3 Rank {rank}] Exception (either an error or timeout) detected by "
        f"watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
        f"{head}:1834] [PG ID 2 PG GUID 3 Rank {rank}] Timeout at NCCL work: {seq}, last enqueued NCCL work: "
        f"{seq}, last completed NCCL work: {seq - 1}.",
        f"{head}:630] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous "
        "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        f"{head}:636] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
    ]
