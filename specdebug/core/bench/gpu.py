"""GPU state around a benchmark: snapshots (via the hosts service's nvidia-smi query) and warnings.

A number measured on a throttling or overheating GPU is not comparable with one measured on a
cool GPU at full clocks, so the runner snapshots before and after, and these warnings travel
with the result. A box without nvidia-smi yields no snapshot and no warning (only a note).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from specdebug.core.hosts import GpuInfo, parse_nvidia_smi, query_gpus
from specdebug.remote.api import Remote

HOT_C = 85.0  # above this, clocks are about to drop on data-centre GPUs
LOW_CLOCK_RATIO = 0.8  # SM clock below 80 % of max while busy


async def snapshot(remote: Remote) -> tuple[list[GpuInfo], str | None]:
    """GPUs now, and why there are none (None when fine); never raises."""
    try:
        return await query_gpus(remote)
    except Exception as exc:  # a GPU query must never fail a benchmark
        return [], f"nvidia-smi failed: {exc}"


async def snapshot_nodes(nodes: Mapping[str, Remote]) -> dict[str, tuple[list[GpuInfo], str | None]]:
    """Every node's GPUs now (a deployment: node host -> its snapshot), all at once; never raises."""
    shots = await asyncio.gather(*(snapshot(r) for r in nodes.values()))
    return dict(zip(nodes, shots, strict=True))


def parse(text: str) -> list[GpuInfo]:
    """Rows of the hosts service's nvidia-smi query (kept here so bench tests need not know hosts)."""
    return parse_nvidia_smi(text)


def gpu_warnings(before: list[GpuInfo], after: list[GpuInfo], node: str | None = None) -> list[str]:
    """Warnings for throttling, heat and low clocks, each naming the GPU (and its node, in a
    deployment: `GPU 1 on node1 throttled ...`) and when it was seen."""
    out: list[str] = []
    where = f" on {node}" if node else ""
    for when, gpus in (("before", before), ("after", after)):
        for g in gpus:
            name = f"GPU {g.index if g.index is not None else '?'}{where}"
            if g.throttled:
                reasons = ", ".join(
                    r for r in g.throttle_reasons if r not in ("gpu_idle", "applications_clocks_setting")
                )
                out.append(f"{name} throttled {when} the run: {reasons}")
            if g.temperature_c is not None and g.temperature_c >= HOT_C:
                out.append(f"{name} hot {when} the run: {g.temperature_c:.0f} C")
            busy = (g.utilization_pct or 0) >= 50
            if (
                when == "after"
                and busy
                and g.clocks_sm_mhz
                and g.clocks_max_sm_mhz
                and g.clocks_sm_mhz < LOW_CLOCK_RATIO * g.clocks_max_sm_mhz
                and not g.throttled
            ):
                out.append(
                    f"{name} SM clock low after the run: {g.clocks_sm_mhz:.0f} of {g.clocks_max_sm_mhz:.0f} MHz"
                )
    return out
