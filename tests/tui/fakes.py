"""Deterministic data for snapshot tests only (pure UI rendering, no network).

The frozen box itself is tests/boxes.py's StillRemote (the one home of box stand-ins)."""

from __future__ import annotations

from specdebug.core.hosts import GpuInfo, HostInfo
from tests.boxes import StillRemote

__all__ = ["StillRemote", "sample_host_info"]


def sample_host_info(name: str = "gpubox") -> HostInfo:
    gpus = [
        GpuInfo(
            index=i,
            name="NVIDIA H200",
            uuid=f"GPU-{i}",
            utilization_pct=97.0 - i,
            memory_used_mib=131072,
            memory_total_mib=143771,
            temperature_c=61 + i,
            power_draw_w=612.0,
            clocks_sm_mhz=1980,
            clocks_max_sm_mhz=1980,
        )
        for i in range(7)
    ]
    gpus.append(
        GpuInfo(
            index=7,
            name="NVIDIA H200",
            utilization_pct=95,
            memory_used_mib=131072,
            memory_total_mib=143771,
            temperature_c=86,
            power_draw_w=700,
            clocks_sm_mhz=1410,
            clocks_max_sm_mhz=1980,
            throttle_reasons_raw="0x20",
            throttle_reasons=["sw_thermal_slowdown"],
        )
    )
    return HostInfo(
        host=name,
        connected=True,
        hostname="gpu-node-07",
        kernel="6.8.0-45-generic",
        cpus=224,
        mem_total_bytes=2 * 2**40,
        load=[12.5, 11.9, 10.2],
        uptime_s=864000,
        gpus=gpus,
        rtt_ms=1.2,
    )
