"""`specdebug probe HOST`: connect, print host facts and GPUs (the hosts pane, headless)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
from typing import TYPE_CHECKING

from specdebug.remote.api import RemoteError
from specdebug.verbs.common import add_host_args, err, open_remote, out, print_json, run_verb

if TYPE_CHECKING:
    from specdebug.core.hosts import HostInfo


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("probe")
    add_host_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=probe)


@run_verb
async def probe(args: argparse.Namespace) -> int:
    # the host facts' models load in a thread while the connection is set up (start-up time)
    hosts_module = asyncio.get_running_loop().run_in_executor(
        None, importlib.import_module, "specdebug.core.hosts"
    )
    if (args.host or "").startswith("slurm:"):
        from specdebug.verbs.slurm_probe import allocation_spec, probe_allocation

        spec = allocation_spec(args.host)  # None: one node named, probed below as one host
        if spec is not None:
            return await probe_allocation(args, spec, await hosts_module)
    try:
        # one-shot: no resident helper (its python3 start-up on the box costs more than the
        # two exec channels this probe needs)
        async with open_remote(args, helper=False) as remote:
            info = await (await hosts_module).gather_host_info(remote)
    except RemoteError as exc:
        err(f"{args.host}: {exc}")
        info = (await hosts_module).HostInfo(host=args.host, connected=False, error=str(exc))
    if args.json:
        print_json(info)
    else:
        _print_text(info)
    return 0 if info.connected else 1


def _print_text(info: HostInfo) -> None:
    if not info.connected:
        out(f"{info.host}: not connected", newlines=False)  # why: said once on stderr (probe's err)
        return
    mem = f"{info.mem_total_bytes / 2**30:.1f} GiB" if info.mem_total_bytes else "?"
    load = " ".join(f"{x:.2f}" for x in info.load or [])
    out(
        f"{info.host}: {info.hostname}  kernel {info.kernel}  {info.cpus} cpus  {mem}  load {load}"
        f"  rtt {_rtt_text(info.rtt_ms)}",
        newlines=False,
    )
    if info.gpu_error:
        out(f"  gpus: {info.gpu_error}", newlines=False)
    for g in info.gpus:
        flag = "  THROTTLED: " + ",".join(g.throttle_reasons) if g.throttled else ""
        flag += "  MEMORY ABOVE TOTAL" if g.memory_over_total else ""
        out(
            f"  GPU{g.index} {g.name}  util {_num(g.utilization_pct)}%  mem {_gib(g.memory_used_mib)}/"
            f"{_gib(g.memory_total_mib)} GiB  {_num(g.temperature_c)}C  {_num(g.power_draw_w)} W"
            f"  sm {_num(g.clocks_sm_mhz, 0)}/{_num(g.clocks_max_sm_mhz, 0)} MHz{flag}",
            newlines=False,
        )


def _gib(mib: float | None) -> str:
    """GPU memory in GiB with one decimal, as the TUI's Hosts pane shows it; `?` when not reported."""
    return "?" if mib is None else f"{mib / 1024:.1f}"


def _num(value: float | None, digits: int = 1) -> str:
    """A reading as nvidia-smi-like text; `?` when the driver did not report it (never `None`)."""
    return "?" if value is None else f"{value:.{digits}f}"


def _rtt_text(rtt_ms: float | None) -> str:
    """Unknown says so (never `0.0 ms`); a loopback round trip under 0.1 ms is not rounded to 0."""
    if rtt_ms is None:
        return "unknown"
    return f"{rtt_ms:.1f} ms" if rtt_ms >= 0.1 else "<0.1 ms"
