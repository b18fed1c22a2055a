"""Host facts for the hosts pane and `specdebug probe`: system info and GPUs, in one round trip.

Everything comes through the probe channel: /proc files in one read request and nvidia-smi
as one short command, concurrently.  A box without nvidia-smi is not a failure: gpus is empty
and gpu_error says why.  Throttle reasons are decoded because a throttled GPU changes
benchmark results.
"""

from __future__ import annotations

import asyncio
import math

from specdebug.core.model import Model
from specdebug.remote.api import Remote, RemoteError

GPU_FIELDS = [
    "index",
    "name",
    "uuid",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    "clocks.sm",
    "clocks.max.sm",
    "clocks_throttle_reasons.active",
]
NVIDIA_SMI_ARGV = ["nvidia-smi", f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,noheader,nounits"]

# nvmlClocksThrottleReasons bits (NVML / nvidia-smi -q "Clocks Event Reasons")
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# reasons that change benchmark results (idle and app-clock settings are benign)
PERFORMANCE_THROTTLES = {
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
}


class GpuInfo(Model):
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    temperature_c: float | None = None
    power_draw_w: float | None = None
    clocks_sm_mhz: float | None = None
    clocks_max_sm_mhz: float | None = None
    throttle_reasons_raw: str | None = None
    throttle_reasons: list[str] = []

    @property
    def throttled(self) -> bool:
        return bool(PERFORMANCE_THROTTLES.intersection(self.throttle_reasons))

    @property
    def memory_over_total(self) -> bool:
        """More memory used than the GPU has: no real reading can say so, so it is flagged, not shown
        as if it were a number to trust (the simulated box said 247.1/140.4 GiB)."""
        used, total = self.memory_used_mib, self.memory_total_mib
        return used is not None and total is not None and total > 0 and used > total


class HostInfo(Model):
    host: str
    connected: bool
    hostname: str | None = None
    kernel: str | None = None
    cpus: int | None = None
    mem_total_bytes: int | None = None
    mem_available_bytes: int | None = None
    load: list[float] | None = None
    uptime_s: float | None = None
    gpus: list[GpuInfo] = []
    gpu_error: str | None = None
    rtt_ms: float | None = None
    error: str | None = None


def _num(text: str) -> float | None:
    text = text.strip()
    if not text or text.startswith("[") or text.lower() in {"n/a", "nan"}:
        return None  # [N/A], [Not Supported], [Unknown Error]
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) < 1e12 else None  # no NaN/inf in our JSON


def _str(text: str) -> str | None:
    text = text.strip()
    return None if not text or text.startswith("[") else text


def decode_throttle(raw: str | None) -> list[str]:
    if not raw:
        return []
    try:
        bits = int(raw, 16) if raw.lower().startswith("0x") else int(raw)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]


MAX_GPUS = 256  # more rows than any box has GPUs: the output is not a GPU listing
MIN_CELLS = 6  # index, name, uuid, utilization, memory used and total: what every driver prints


def parse_nvidia_smi(text: str) -> list[GpuInfo]:
    """Rows of `nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits`.

    Tolerates [N/A] / [Not Supported] values and rows with fewer fields (old drivers); lines that
    are not GPU rows are skipped (see `check_nvidia_smi` for what is said about them)."""
    return check_nvidia_smi(text)[0]


def check_nvidia_smi(text: str) -> tuple[list[GpuInfo], str | None]:
    """The GPU rows of nvidia-smi's output, and a note on what was not one (None when all were).

    A row has MIN_CELLS to len(GPU_FIELDS) cells and a whole-number index not seen before; more
    than MAX_GPUS rows is not a listing at all (garbage output must not become phantom GPUs)."""
    gpus: list[GpuInfo] = []
    skipped: list[str] = []
    seen: set[int] = set()
    for line in text.splitlines():
        if not line.strip() or line.lower().startswith("index"):
            continue
        gpu = _row(line)
        if gpu is None or gpu.index in seen:
            skipped.append(line)
            continue
        seen.add(gpu.index or 0)
        gpus.append(gpu)
    if len(gpus) > MAX_GPUS:
        return [], f"nvidia-smi printed {len(gpus)} rows, more than any box has GPUs: not a GPU listing"
    if not skipped:
        return gpus, None
    return (
        gpus,
        f"{len(skipped)} line(s) of nvidia-smi output were not GPU rows, skipped: {skipped[0][:80]!r}",
    )


def _row(line: str) -> GpuInfo | None:
    cells = [c.strip() for c in line.split(",")]
    if not MIN_CELLS <= len(cells) <= len(GPU_FIELDS) or not cells[0].isdigit() or len(cells[0]) > 4:
        return None
    cells += [""] * (len(GPU_FIELDS) - len(cells))
    raw = _str(cells[10])
    return GpuInfo(
        index=int(cells[0]),
        name=_str(cells[1]),
        uuid=_str(cells[2]),
        utilization_pct=_num(cells[3]),
        memory_used_mib=_num(cells[4]),
        memory_total_mib=_num(cells[5]),
        temperature_c=_num(cells[6]),
        power_draw_w=_num(cells[7]),
        clocks_sm_mhz=_num(cells[8]),
        clocks_max_sm_mhz=_num(cells[9]),
        throttle_reasons_raw=raw,
        throttle_reasons=decode_throttle(raw),
    )


async def query_gpus(remote: Remote) -> tuple[list[GpuInfo], str | None]:
    """GPUs and an error text (None when fine).  No nvidia-smi is reported, not raised."""
    try:
        res = await remote.run(NVIDIA_SMI_ARGV, timeout=20)
    except RemoteError as exc:
        return [], f"nvidia-smi failed: {exc}"
    if res.timed_out:
        return [], "nvidia-smi timed out after 20 s"
    if res.exit_status == 127 or "not found" in res.err.lower() or "no such file" in res.err.lower():
        return [], "nvidia-smi not found on the box"
    if res.truncated:
        return [], "nvidia-smi printed more than specdebug reads of a command's output: not read"
    if res.exit_status != 0:
        return [], f"nvidia-smi exit {res.exit_status}: {(res.err or res.out).strip()[:300]}"
    return check_nvidia_smi(res.out)


STATIC_FILES = ["/proc/sys/kernel/hostname", "/proc/sys/kernel/osrelease", "/proc/cpuinfo"]
LIVE_FILES = ["/proc/loadavg", "/proc/uptime", "/proc/meminfo"]


async def gather_host_info(remote: Remote, previous: HostInfo | None = None) -> HostInfo:
    """One snapshot of a connected host (raises RemoteError when not connected).

    With `previous` (same host, same connection) the facts that never change (hostname, kernel,
    CPU count: /proc/cpuinfo is ~400 KB on a 192-thread box) are reused, not read again."""
    static = previous is not None and previous.connected and previous.cpus is not None
    paths = LIVE_FILES if static else LIVE_FILES + STATIC_FILES
    files_task = asyncio.ensure_future(remote.read_files(paths))
    gpus, gpu_error = await query_gpus(remote)
    files = {f.path: (f.data or b"").decode("utf-8", "replace") for f in await files_task}
    info = HostInfo(
        host=remote.name, connected=True, gpus=gpus, gpu_error=gpu_error, rtt_ms=remote.status.rtt_ms
    )
    if static:
        assert previous is not None  # static is only set with a previous snapshot
        info.hostname, info.kernel, info.cpus = previous.hostname, previous.kernel, previous.cpus
    else:
        info.hostname = files["/proc/sys/kernel/hostname"].strip() or None
        info.kernel = files["/proc/sys/kernel/osrelease"].strip() or None
        cpus = sum(1 for line in files["/proc/cpuinfo"].splitlines() if line.startswith("processor"))
        info.cpus = cpus or None
    parts = files["/proc/loadavg"].split()
    if len(parts) >= 3:
        info.load = [float(p) for p in parts[:3]]
    up = files["/proc/uptime"].split()
    if up:
        info.uptime_s = float(up[0])
    for line in files["/proc/meminfo"].splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable") and rest.split():
            value = int(rest.split()[0]) * 1024
            if key == "MemTotal":
                info.mem_total_bytes = value
            else:
                info.mem_available_bytes = value
    return info
