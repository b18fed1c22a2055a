"""The configured NCCL intent (each worker's environ) against what its node's NCCL lines show.

Apart from the parser because it reads the other half of the evidence: `NCCL_IB_DISABLE`,
`NCCL_NET`, `NCCL_SOCKET_IFNAME` and `NCCL_IB_HCA` as the workers really got them (their
/proc/PID/environ), with NCCL's own matching rules for the two lists (`^` excludes, `=` is exact,
otherwise prefixes; NCCL env docs).  A mismatch is a finding, named by node, PID and line; a node
whose environ was not read gets no finding (nothing is assumed about it).  /etc/nccl.conf and
NCCL_CONF_FILE can also set these: a finding says the environ is only part of NCCL's config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specdebug.core.deployment.nccl import NcclEdge, NodeNccl

VARS = ("NCCL_IB_DISABLE", "NCCL_NET", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")
_IB = ("ib", "ib-gdrdma")


def matches_list(spec: str, name: str) -> bool:
    """Does interface/HCA `name` pass an NCCL list such as `eth,ib`, `^docker`, `=eth0`, `mlx5_0:1`?"""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    hit = False
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        want, _, port = item.partition(":")
        have, _, have_port = name.partition(":")
        same = have == want if exact else have.startswith(want)
        if same and (not port or not have_port or port == have_port):
            hit = True
            break
    return not hit if exclude else hit


def _node_intent(
    node: str, envs: Mapping[int, Mapping[str, str]], out: list[str]
) -> dict[str, tuple[str, int]]:
    """var -> (value, a PID that has it); a var whose value differs between the node's workers is a finding."""
    intent: dict[str, tuple[str, int]] = {}
    for var in VARS:
        values: dict[str | None, list[int]] = {}
        for pid, env in sorted(envs.items()):
            values.setdefault(env.get(var), []).append(pid)
        if len(values) > 1:
            shown = "; ".join(
                f"{v if v is not None else '(unset)'} in PIDs {pids[:4]}" for v, pids in values.items()
            )
            out.append(f"{node}: {var} differs between its workers: {shown}")
        set_values = [(v, pids[0]) for v, pids in values.items() if v is not None]
        if set_values:
            intent[var] = set_values[0]
    return intent


def intent_findings(
    infos: list[NodeNccl], inter: list[NcclEdge], environ: Mapping[str, Mapping[int, Mapping[str, str]]]
) -> list[str]:
    """Every mismatch between a node's workers' NCCL env and its observed lines, one line each."""
    out: list[str] = []
    disabled = [
        n for n, envs in environ.items() if any(e.get("NCCL_IB_DISABLE") == "1" for e in envs.values())
    ]
    for info in infos:
        envs = environ.get(info.node)
        if not envs:
            continue
        intent = _node_intent(info.node, envs, out)
        own = [e for e in inter if e.node == info.node]
        seen: set[str] = {e.transport for e in own}
        example: dict[str, str] = {}
        for e in own:
            example.setdefault(e.transport, f"{e.src}->{e.dst} via {e.via}")
        edge = example.__getitem__

        ib_off = intent.get("NCCL_IB_DISABLE")
        if ib_off and ib_off[0] == "1" and seen & set(_IB):
            t = next(t for t in _IB if t in seen)
            out.append(
                f"{info.node}: NCCL_IB_DISABLE=1 in PID {ib_off[1]}'s environ, but its ranks went over IB ({edge(t)})"
            )
        net = intent.get("NCCL_NET")
        if net and seen:
            want = net[0].lower()
            got = {"socket" if t == "socket" else "ib" if t in _IB else t for t in seen}
            if got != {want}:
                shown = ", ".join(edge(t) for t in sorted(seen))
                out.append(
                    f"{info.node}: NCCL_NET={net[0]} in PID {net[1]}'s environ, but its edges went {shown}"
                )
        if (
            "socket" in seen
            and not (ib_off and ib_off[0] == "1")
            and not (net and net[0].lower() == "socket")
        ):
            why = "NCCL found no IB device there (NET/IB : No device found)" if info.ib_none else ""
            others = [n for n in disabled if n != info.node]
            if not why and others:
                why = f"NCCL_IB_DISABLE=1 on {', '.join(others)} forces its peers onto sockets"
            out.append(
                f"{info.node}: inter-node edges went over TCP sockets ({edge('socket')}) though nothing in its "
                f"workers' environ asks for that" + (f"; {why}" if why else "")
            )
        ifname = intent.get("NCCL_SOCKET_IFNAME")
        if ifname:
            bad = [i for i in info.interfaces if not matches_list(ifname[0], i)]
            if bad:
                out.append(
                    f"{info.node}: NCCL_SOCKET_IFNAME={ifname[0]} in PID {ifname[1]}'s environ, but NCCL "
                    f"used interface {', '.join(bad)}"
                )
        hca = intent.get("NCCL_IB_HCA")
        if hca:
            bad = [d for d in info.ib_devices if not matches_list(hca[0], d.split("/")[0])]
            if bad:
                out.append(
                    f"{info.node}: NCCL_IB_HCA={hca[0]} in PID {hca[1]}'s environ, but NCCL used {', '.join(bad)}"
                )
            if "socket" in seen and not seen & set(_IB):
                out.append(
                    f"{info.node}: NCCL_IB_HCA={hca[0]} asks for IB devices, but its edges went over sockets"
                )
    if out:
        out.append(
            "(the environ is not all of NCCL's config: /etc/nccl.conf and NCCL_CONF_FILE can set these too)"
        )
    return out
