"""The NCCL transport proof: which way every inter-node edge really went, from each rank's own lines.

Why it exists: a multi-node server that fell back from InfiniBand to TCP sockets still works, only
slowly, and nothing but NCCL's INFO lines says so.  The lines (NVIDIA/nccl src/init.cc "Using
network %s", src/transport/net.cc "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d...",
"ncclCommInitRank comm ... rank r nranks n ... commId C - Init COMPLETE"; see
shared/notes/multinode.md section 2.2) are parsed per node and process.  A channel line belongs to
the communicator whose `Init COMPLETE` the same process prints next; rank -> node comes from the
node whose log printed the rank's `Init COMPLETE` (the log we read, not the host name in the line:
nodes may share a name).  An edge is inter-node when its two ranks are on different nodes (or, a
peer not placed, when it went over NET).  Missing lines make the verdict `unproven`, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field

from specdebug.core.model import Model
from specdebug.core.profiles.deployment import ExpectTransport

Transport = Literal["ib-gdrdma", "ib", "socket", "other", "p2p", "shm"]
Verdict = Literal["ib-gdrdma", "ib", "socket", "other", "unproven"]
Expected = ExpectTransport  # `[deployment] expect_transport`: what every inter-node edge must go over
HINT = "set NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET on every node and launch again"
_RANK = {"socket": 0, "other": 1, "ib": 2, "ib-gdrdma": 3}  # worst first: the verdict is the worst edge

# `[ts] host:pid:tid [dev] NCCL INFO msg`; a WARN carries `file.cc:LINE` (since 2.21) and, since 2.30,
# `(func)` before `NCCL WARN` (nccl src/debug.cc); the timestamp is optional (on for WARN by default)
_LINE_RE = re.compile(
    r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\]"
    r"(?: \S+:\d+)?(?: \([^)]*\))? NCCL (?P<level>INFO|WARN) (?P<msg>.*)$"
)
_NETWORK_RE = re.compile(r"^Using network (?P<net>\S+)")
_CHANNEL_RE = re.compile(
    r"^Channel (?P<ch>\d+)(?:/(?P<sub>\d+))? : (?P<src>\d+)\[(?P<sdev>\d+)\] -> (?P<dst>\d+)\[(?P<ddev>\d+)\]"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S+)"
)
_COMPLETE_RE = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+).*?"
    r"(?:commId (?P<cid>0x[0-9a-fA-F]+) )?- Init COMPLETE"
)
# `Bootstrap: Using eth0:10.0.0.1<0>` since 2.24 (`Bootstrap : Using` before); `NET/Socket : Using [0]eth0:...`
_IFACE_RE = re.compile(r"^(?:Bootstrap ?: Using|NET/Socket : Using)(?P<ifs>.*)$")
# nccl src/transport/net_ib/init.cc: "NET/IB : Using%s %s; OOB %s:%s" = ` [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE`,
# then `[RO]` (PCI relaxed ordering) or nothing, then `; OOB eth0:10.0.0.1<0>`: only the `[n]` items
# are devices; the OOB part is the socket interface IB's out-of-band traffic uses
_IB_DEV_RE = re.compile(r"^NET/IB : Using(?P<devs>.*?)(?:;\s*OOB\s+(?P<oob>\S+))?\s*$")
_IB_DEV_ITEM_RE = re.compile(r"\[\d+\](?P<dev>[^\s\[\];]+)")


def classify(via: str) -> Transport:
    """`NET/IB/0/GDRDMA` -> ib-gdrdma, `NET/IB/1` -> ib, `NET/Socket/0` -> socket, `P2P/IPC` -> p2p."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        net = parts[1].split("(")[0]
        if net == "IB":
            return "ib-gdrdma" if "GDRDMA" in via else "ib"
        return "socket" if net == "Socket" else "other"
    if parts[0] == "P2P":
        return "p2p"
    return "shm" if parts[0] == "SHM" else "other"


class NcclEdge(Model):
    """One channel connection as a rank printed it."""

    comm: str | None = None  # commId (or the comm pointer) of the communicator it belongs to
    src: int
    dst: int
    src_node: str | None = None
    dst_node: str | None = None
    direction: Literal["send", "receive"] | None = None
    channel: int
    via: str
    transport: Transport
    node: str  # the node whose log printed it
    pid: int
    inter_node: bool | None  # None: a peer's node is not known


class NodeNccl(Model):
    """What one node's NCCL lines say."""

    node: str
    lines: int = 0
    networks: list[str] = Field(default_factory=list)  # `Using network X`, in order, without repeats
    ranks: list[int] = Field(default_factory=list)  # ranks whose Init COMPLETE this node printed
    pids: list[int] = Field(default_factory=list)
    interfaces: list[str] = Field(default_factory=list)  # bootstrap / socket interfaces it used
    ib_devices: list[str] = Field(default_factory=list)  # `NET/IB : Using [0]mlx5_0:1/IB ...`
    ib_none: bool = False  # `NET/IB : No device found.`
    incomplete: int = 0  # channel lines never followed by their communicator's Init COMPLETE
    warnings: list[str] = Field(default_factory=list)


class TransportProof(Model):
    """The verdict per deployment with every inter-node edge and the findings that back or doubt it;
    with an expectation (`[deployment] expect_transport`), what fails it."""

    verdict: Verdict
    reason: str
    edges: list[NcclEdge] = Field(default_factory=list)  # inter-node edges (and edges of unknown peers)
    intra_node: dict[str, dict[str, int]] = Field(default_factory=dict)  # node -> p2p/shm -> channel lines
    nodes: list[NodeNccl] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)
    hint: str | None = None
    source: str = "NCCL INFO lines in each node's server log"
    expected: Expected | None = None
    failures: list[str] = Field(default_factory=list)  # the expectation's misses (exit 1)


class _Pending(Model):
    edges: list[NcclEdge] = Field(default_factory=list)


def _add(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)


def parse_node(
    node: str, lines: Iterable[str]
) -> tuple[NodeNccl, list[NcclEdge], dict[tuple[str, int], str]]:
    """One node's lines: its summary, its edges (comm filled where its Init COMPLETE came), and
    (comm, rank) -> node for every Init COMPLETE it printed."""
    info = NodeNccl(node=node)
    pending: dict[int, _Pending] = {}
    edges: list[NcclEdge] = []
    placed: dict[tuple[str, int], str] = {}
    for text in lines:
        m = _LINE_RE.search(text)
        if m is None:
            continue
        info.lines += 1
        pid, msg = int(m["pid"]), m["msg"].strip()
        if pid not in info.pids:
            info.pids.append(pid)
        if m["level"] == "WARN":
            if len(info.warnings) < 20:
                info.warnings.append(msg[:300])
            continue
        if net := _NETWORK_RE.match(msg):
            _add(info.networks, net["net"])
        elif ch := _CHANNEL_RE.match(msg):
            edge = NcclEdge(
                src=int(ch["src"]),
                dst=int(ch["dst"]),
                direction=ch["dir"],  # type: ignore[arg-type]
                channel=int(ch["ch"]),
                via=ch["via"],
                transport=classify(ch["via"]),
                node=node,
                pid=pid,
                inter_node=None,
            )
            pending.setdefault(pid, _Pending()).edges.append(edge)
        elif done := _COMPLETE_RE.search(msg):
            comm = done["cid"] or done["comm"]
            rank = int(done["rank"])
            placed[(comm, rank)] = node
            if rank not in info.ranks:
                info.ranks.append(rank)
            for edge in pending.pop(pid, _Pending()).edges:
                edge.comm = comm
                edges.append(edge)
        elif msg.startswith("NET/IB : No device found"):
            info.ib_none = True
        elif ib := _IB_DEV_RE.match(msg):
            for dev in _IB_DEV_ITEM_RE.finditer(ib["devs"]):
                _add(info.ib_devices, dev["dev"])
            if ib["oob"] and (oob := ib["oob"].split(":")[0]):
                _add(info.interfaces, oob)
        elif iface := _IFACE_RE.match(msg):
            for word in iface["ifs"].split():
                name = re.sub(r"^\[\d+\]", "", word).split(":")[0]
                if name:
                    _add(info.interfaces, name)
    for left in pending.values():  # channels of a communicator that never completed its init
        info.incomplete += len(left.edges)
        edges.extend(left.edges)
    info.ranks.sort()
    return info, edges, placed


def prove_transport(
    lines_by_node: Mapping[str, Iterable[str]],
    environ: Mapping[str, Mapping[int, Mapping[str, str]]] | None = None,
    *,
    expect: Expected | None = None,
) -> TransportProof:
    """The deployment's transport verdict from each node's lines (node -> lines, every node of the
    deployment, even one with no lines), checked against each node's workers' environ (node -> PID
    -> env) when given, and against what the deployment expects (`[deployment] expect_transport`)."""
    from specdebug.core.deployment.nccl_intent import intent_findings

    infos: list[NodeNccl] = []
    edges: list[NcclEdge] = []
    placed: dict[tuple[str, int], str] = {}
    clashes: dict[tuple[str, int], set[str]] = {}
    for node, lines in lines_by_node.items():
        info, node_edges, node_placed = parse_node(node, lines)
        infos.append(info)
        edges += node_edges
        for key, where in node_placed.items():
            if key in placed and placed[key] != where:
                clashes.setdefault(key, {placed[key]}).add(where)
            placed[key] = where
    for key in clashes:  # two communicators with one id (independent servers): place neither
        placed.pop(key, None)
    inter: list[NcclEdge] = []
    intra: list[NcclEdge] = []
    for edge in edges:
        if edge.comm is not None:
            edge.src_node = placed.get((edge.comm, edge.src))
            edge.dst_node = placed.get((edge.comm, edge.dst))
        if edge.src_node and edge.dst_node:
            edge.inter_node = edge.src_node != edge.dst_node
        elif edge.transport not in ("p2p", "shm") and edge.via.startswith("NET/"):
            edge.inter_node = None  # over the network, peer not placed: counted, said so
        else:
            continue
        (inter if edge.inter_node is not False else intra).append(edge)
    findings = [
        f"commId {comm} rank {rank} completed its init on {', '.join(sorted(nodes))}: not one communicator "
        "(do the nodes run one server?)"
        for (comm, rank), nodes in sorted(clashes.items())
    ][:10]
    findings += _disagreements(inter)
    findings += intra_findings(intra, environ or {})
    findings += intent_findings(infos, inter, environ or {})
    verdict, reason = _verdict(infos, inter)
    proof = TransportProof(
        verdict=verdict,
        reason=reason,
        edges=inter,
        intra_node=_intra_counts(intra),
        nodes=infos,
        findings=findings,
        hint=HINT if verdict == "unproven" else None,
    )
    if expect is not None:
        proof.expected = expect
        proof.failures = expectation_failures(proof, expect)
    return proof


def _verdict(infos: list[NodeNccl], inter: list[NcclEdge]) -> tuple[Verdict, str]:
    silent = [i.node for i in infos if i.lines == 0]
    no_edges = [i.node for i in infos if not any(e.node == i.node for e in inter)]
    seen = sorted({e.transport for e in inter if e.transport in _RANK}, key=lambda t: _RANK[t])
    if not inter:
        why = "no NCCL lines" if len(silent) == len(infos) else "no inter-node channel lines"
        return "unproven", f"{why} in {', '.join(silent or no_edges) or 'any node'}'s log"
    worst = seen[0] if seen else "other"
    mixed = f" ({', '.join(seen)} seen)" if len(seen) > 1 else ""
    if len(infos) > 1 and no_edges:
        return "unproven", (
            f"{', '.join(no_edges)} printed no inter-node channel lines; the others' edges went {worst}{mixed}"
        )
    pending = sum(i.incomplete for i in infos)
    if mixed:
        worst_at = sorted({e.node for e in inter if e.transport == worst})
        n = sum(1 for e in inter if e.transport == worst)
        reason = (
            f"{n} of {len(inter)} inter-node edges went {worst} (as {', '.join(worst_at)} printed them); "
            f"the others {', '.join(t for t in seen if t != worst)}"
        )
    else:
        where = ", ".join(f"{i.node}: {sum(1 for e in inter if e.node == i.node)} edges" for i in infos)
        reason = f"every inter-node edge went {worst} ({where})"
    if pending:
        reason += f"; {pending} channel lines of a communicator that did not complete its init"
    return worst, reason  # type: ignore[return-value]


def network_of(via: str) -> str:
    """The network a `via` names, without what is each end's own: `NET/IB/3(11)/GDRDMA` -> `IB`.

    Each end of an edge prints ITS OWN NIC index (and PXN proxy rank, and whether its own GPU-NIC
    path does GPUDirect RDMA: a sender without GDR read beside a receiver with it is normal), so two
    ends of a healthy edge print `NET/IB/3/GDRDMA` and `NET/IB/0/GDRDMA`; only the network itself
    (IB, Socket, a plugin's) must be the same on both (nccl src/transport/net.cc)."""
    parts = via.split("/")
    return parts[1].split("(")[0] if parts[0] == "NET" and len(parts) > 1 else parts[0]


def _disagreements(inter: list[NcclEdge]) -> list[str]:
    """An edge both of whose ends printed it over different networks (IB at one end, Socket at the
    other): the nodes do not agree on the network (their NCCL env differs), so what the edge really
    carries is in doubt.  NIC indices and GDRDMA are each end's own and never compared."""
    ends: dict[tuple[str | None, int, int, int], dict[str, NcclEdge]] = {}
    for e in inter:
        ends.setdefault((e.comm, e.src, e.dst, e.channel), {})[e.node] = e
    out = []
    for (_, src, dst, ch), by_node in sorted(ends.items(), key=lambda kv: kv[0][1:]):
        vias = {n: e.via for n, e in by_node.items()}
        if len({network_of(v) for v in vias.values()}) > 1:
            said = ", ".join(f"{n} printed {v}" for n, v in sorted(vias.items()))
            out.append(
                f"edge {src}->{dst} channel {ch}: its two ends disagree ({said}): check the NCCL env per node"
            )
    return out[:10]


def _intra_counts(intra: list[NcclEdge]) -> dict[str, dict[str, int]]:
    """node -> transport -> intra-node channel lines it printed (p2p, shm, or a NET loopback)."""
    out: dict[str, dict[str, int]] = {}
    for e in intra:
        per = out.setdefault(e.node, {})
        per[e.transport] = per.get(e.transport, 0) + 1
    return out


def intra_findings(
    intra: list[NcclEdge], environ: Mapping[str, Mapping[int, Mapping[str, str]]]
) -> list[str]:
    """A node whose GPUs talk through host shared memory (SHM) instead of P2P (NVLink / PCIe): NCCL's
    intra-node fallback, slow for tensor parallelism, said per node with an example edge and, when the
    workers' environ asks for it, the variable that did."""
    out = []
    for node in sorted({e.node for e in intra}):
        own = [e for e in intra if e.node == node]
        shm = [e for e in own if e.transport == "shm"]
        if not shm:
            continue
        envs = environ.get(node, {})
        asked = sorted(
            {
                f"{var}={env[var]}"
                for env in envs.values()
                for var in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")
                if var in env and (var != "NCCL_P2P_DISABLE" or env[var] == "1")
            }
        )
        why = (
            f"its workers' environ has {', '.join(asked)}"
            if asked
            else "P2P between its GPUs is off or not possible (NCCL_P2P_DISABLE / NCCL_P2P_LEVEL in "
            "nccl.conf, no NVLink/PCIe P2P, containers without IPC)"
        )
        e = shm[0]
        out.append(
            f"{node}: {len(shm)} of {len(own)} intra-node channel lines went over SHM (host shared memory), "
            f"not P2P (e.g. {e.src}->{e.dst} via {e.via}): {why}"
        )
    return out


def expectation_failures(proof: TransportProof, expect: Expected) -> list[str]:
    """What fails the deployment's `expect_transport`: an inter-node edge over another network (or
    IB without GPUDirect RDMA when `ib-gdrdma` is expected), or no proof at all (cannot tell is not
    a pass)."""
    want = {"ib": ("ib", "ib-gdrdma"), "ib-gdrdma": ("ib-gdrdma",)}[expect]
    if proof.verdict == "unproven":
        return [f"{expect} expected, but the transport is unproven ({proof.reason}): {HINT}"]
    bad = [e for e in proof.edges if e.transport not in want]
    if not bad:
        return []
    nodes = sorted({e.node for e in bad})
    e = bad[0]
    return [
        f"{expect} expected, but {len(bad)} of {len(proof.edges)} inter-node channel lines went "
        f"{', '.join(sorted({b.transport for b in bad}))} (printed by {', '.join(nodes)}; e.g. {e.node} pid "
        f"{e.pid}: {e.src}->{e.dst} via {e.via})"
    ]
