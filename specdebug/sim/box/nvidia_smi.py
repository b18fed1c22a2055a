"""A fake `nvidia-smi` for the simulated box: 8 H200s whose numbers follow the running sims.

Why: the demo box has no GPU, yet GPUs are half of what the hosts pane and the benchmark's
warnings are about.  How: every sim launcher started with $SPECDEBUG_SIM_GPU_DIR set writes its
load there (`LoadWriter`: GPUs it occupies, memory, utilization, heat, a planned throttle) about
twice a second; `python -m specdebug.sim.box.nvidia_smi` (put first on the box's PATH as `nvidia-smi`
by the demo's SSH server) reads the files of live sims and prints what the real tool prints for
the subset specdebug uses:

    nvidia-smi --query-gpu=FIELD,... --format=csv[,noheader][,nounits] [-i 0,1]
    nvidia-smi -L
    nvidia-smi                      (the summary table)

A sim run with `--throttle-gpu N --throttle-after S` makes GPU N thermal-throttle S seconds after
it started (SW thermal slowdown bit, 88 C, SM clock capped), until the sim exits; the cost model
slows that server by the same clock ratio (costmodel.Throttle).

The GPUs are one resource shared by every sim on the simulated box: a sim that reaches kv_cache
on a GPU whose memory earlier sims already hold (sim/box/gpushare.py) fails there with SGLang's
memory-pool error, as a second server on a real GPU does.  Memory used above the total (what only
a broken reading could show) is flagged in the table.
Kept free of heavy imports: it runs once per probe.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specdebug.sim.box import gpu_admin
from specdebug.sim.server.common.costmodel import MAX_SM_MHZ, THROTTLED_SM_MHZ

ENV_DIR = "SPECDEBUG_SIM_GPU_DIR"
GPU_COUNT = 8
NAME = "NVIDIA H200"
MEM_TOTAL_MIB = 143771
IDLE_SM_MHZ = 345
POWER_IDLE_W, POWER_MAX_W, POWER_LIMIT_W = 72.0, 632.0, 700.0
TEMP_IDLE_C, TEMP_HOT_C, TEMP_THROTTLED_C = 31.0, 68.0, 88.0
DRIVER, CUDA = "550.54.15", "12.4"
STALE_S = 10.0  # a load file not rewritten for this long belongs to a sim that is gone
HEAT_TAU_S = 30.0  # how fast a busy GPU warms up
BIT_IDLE, BIT_SW_THERMAL = 0x1, 0x20

# utilization (%) and share of memory in use during each startup phase (memory: of the final use)
PHASE_LOAD = {
    "init": (0.0, 0.0),
    "load_weights": (6.0, 0.55),
    "kv_cache": (2.0, 0.97),
    "cuda_graph": (55.0, 1.0),
    "http": (0.0, 1.0),
    "warmup": (30.0, 1.0),
    "ready": (0.0, 1.0),
}
CONTEXT_MIB = 520.0  # CUDA context of a process that touched the GPU


# ---- the sim side: what a running sim puts on "its" GPUs ------------------------------------------------
class LoadWriter:
    """Thread in the sim launcher: samples (phase, busy) and rewrites <dir>/sim-<pid>.json."""

    def __init__(
        self,
        directory: str,
        gpus: list[int],
        sample: Callable[[], tuple[str | None, bool]],
        *,
        mem_fraction: float,
        throttle_gpu: int | None = None,
        throttle_after_s: float = 0.0,
        interval: float = 0.5,
    ) -> None:
        self.path = Path(directory) / f"sim-{os.getpid()}.json"
        self.gpus = gpus
        self.sample = sample
        self.mem_fraction = mem_fraction
        self.started_at = time.time()
        self.throttle = (
            {"gpu": throttle_gpu, "at": self.started_at + max(0.0, throttle_after_s)}
            if throttle_gpu is not None
            else None
        )
        self.interval = interval
        self.util = 0.0
        self.heat = 0.0
        self.phase: str | None = None
        self._stop = threading.Event()

    @classmethod
    def from_env(cls, tp_size: int, sample: Callable[[], tuple[str | None, bool]], **kw) -> LoadWriter | None:
        directory = os.environ.get(ENV_DIR)
        if not directory:
            return None
        return cls(directory, visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), tp_size), sample, **kw)

    def start(self) -> None:
        threading.Thread(target=self._loop, name="gpu-load", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        try:
            self.path.unlink()
        except OSError:
            pass

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            self.step(now - last)
            last = now
            self.write()
            self._stop.wait(self.interval)

    def step(self, dt: float) -> None:
        """Advance utilization (follows load within a second) and heat (tens of seconds)."""
        phase, busy = self.sample()
        target = 97.0 if busy else PHASE_LOAD.get(phase or "init", (0.0, 0.0))[0]
        self.util += (target - self.util) * min(1.0, dt / 0.5)
        self.heat += (self.util / 100.0 - self.heat) * min(1.0, dt / HEAT_TAU_S)
        self.phase = phase

    def state(self) -> dict:
        share = PHASE_LOAD.get(self.phase or "init", (0.0, 0.0))[1]
        final = self.mem_fraction * MEM_TOTAL_MIB
        return {
            "pid": os.getpid(),
            "t": time.time(),
            "started_at": self.started_at,
            "gpus": self.gpus,
            "mem_mib": round(CONTEXT_MIB + share * (final - CONTEXT_MIB)),
            "mem_final_mib": round(final),  # what it holds once up: what a later sim must fit beside
            "util": round(self.util, 1),
            "heat": round(self.heat, 3),
            "throttle": self.throttle,
        }

    def write(self) -> None:
        tmp = self.path.with_name(f"{self.path.name}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.state()))
            os.replace(tmp, self.path)
        except OSError:
            pass


def visible_gpus(cuda_visible: str | None, tp_size: int) -> list[int]:
    """GPUs a sim occupies: the first tp_size of CUDA_VISIBLE_DEVICES, else 0..tp_size-1."""
    if cuda_visible:
        ids = [int(x) for x in cuda_visible.split(",") if x.strip().isdigit()]
        if ids:
            return ids[: max(1, tp_size)]
    return list(range(min(max(1, tp_size), GPU_COUNT)))


# ---- the nvidia-smi side ----------------------------------------------------------------------------------
@dataclass
class Gpu:
    index: int
    util: float = 0.0
    mem_used: float = 1.0
    temp: float = TEMP_IDLE_C
    power: float = POWER_IDLE_W
    sm: float = IDLE_SM_MHZ
    reasons: int = BIT_IDLE
    pids: tuple[int, ...] = ()

    @property
    def over_total(self) -> bool:
        """More memory in use than the GPU has: servers that cannot all fit (flagged, not hidden)."""
        return self.mem_used > MEM_TOTAL_MIB

    @property
    def uuid(self) -> str:
        return f"GPU-5e1a0c7d-{self.index:04x}-4b2e-9d41-0000c0ffee{self.index:02x}"

    @property
    def bus_id(self) -> str:
        return f"00000000:{0x18 + 0x11 * self.index:02X}:00.0"


def gpu_table(loads: list[dict], now: float, count: int = GPU_COUNT) -> list[Gpu]:
    """The GPUs as the sims' load files say they are now (pure: loads and time in)."""
    gpus = [Gpu(i) for i in range(count)]
    for load in loads:
        throttle = load.get("throttle") or {}
        for i in load.get("gpus", []):
            if not 0 <= i < count:
                continue
            g = gpus[i]
            g.util = min(100.0, g.util + float(load.get("util", 0.0)))
            g.mem_used += float(load.get("mem_mib", 0.0))
            heat = float(load.get("heat", 0.0))
            g.temp = max(g.temp, TEMP_IDLE_C + heat * (TEMP_HOT_C - TEMP_IDLE_C))
            g.pids = (*g.pids, int(load.get("pid", 0)))
            if throttle.get("gpu") == i and now >= float(throttle.get("at", 0.0)):
                g.reasons |= BIT_SW_THERMAL
    for g in gpus:
        busy = g.util >= 1.0
        g.power = POWER_IDLE_W + (POWER_MAX_W - POWER_IDLE_W) * g.util / 100.0
        g.sm = MAX_SM_MHZ if busy else IDLE_SM_MHZ
        if busy:
            g.reasons &= ~BIT_IDLE
        if g.reasons & BIT_SW_THERMAL:
            g.temp = max(g.temp, TEMP_THROTTLED_C + g.util / 50.0)
            g.sm = min(g.sm, THROTTLED_SM_MHZ)
            g.power = min(g.power, 0.65 * POWER_LIMIT_W)
    return gpus


def read_loads(directory: str | None, now: float) -> list[dict]:
    """Load files of live sims; files of dead ones are removed."""
    if not directory:
        return []
    out = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    for name in names:
        if not (name.startswith("sim-") and name.endswith(".json")):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as fh:
                load = json.load(fh)
        except (OSError, ValueError):
            continue
        if now - float(load.get("t", 0)) > STALE_S or not _alive(int(load.get("pid", 0))):
            try:
                os.unlink(path)
            except OSError:
                pass
            continue
        out.append(load)
    return out


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# field -> (unit in the header and values, value of a Gpu)
FIELDS: dict[str, tuple[str, Callable[[Gpu], str]]] = {
    "index": ("", lambda g: str(g.index)),
    "name": ("", lambda g: NAME),
    "uuid": ("", lambda g: g.uuid),
    "pci.bus_id": ("", lambda g: g.bus_id),
    "driver_version": ("", lambda g: DRIVER),
    "pstate": ("", lambda g: "P0"),
    "utilization.gpu": ("%", lambda g: f"{g.util:.0f}"),
    "utilization.memory": ("%", lambda g: f"{g.util * 0.6:.0f}"),
    "memory.total": ("MiB", lambda g: str(MEM_TOTAL_MIB)),
    "memory.used": ("MiB", lambda g: f"{g.mem_used:.0f}"),
    "memory.free": ("MiB", lambda g: f"{MEM_TOTAL_MIB - g.mem_used:.0f}"),
    "temperature.gpu": ("", lambda g: f"{g.temp:.0f}"),
    "power.draw": ("W", lambda g: f"{g.power:.2f}"),
    "power.limit": ("W", lambda g: f"{POWER_LIMIT_W:.2f}"),
    "clocks.sm": ("MHz", lambda g: f"{g.sm:.0f}"),
    "clocks.max.sm": ("MHz", lambda g: str(MAX_SM_MHZ)),
    "clocks_throttle_reasons.active": ("", lambda g: f"0x{g.reasons:016x}"),
    "clocks_event_reasons.active": ("", lambda g: f"0x{g.reasons:016x}"),
}
FIELDS.update(gpu_admin.EXTRA_FIELDS)  # power limits set with -pl, persistence, ECC (sim.box.gpu_admin)
HEADER_NAMES = {"clocks.sm": "clocks.current.sm", "clocks.max.sm": "clocks.max.sm"}


def query_csv(gpus: list[Gpu], fields: list[str], *, header: bool, units: bool) -> str:
    lines = []
    if header:
        lines.append(
            ", ".join(HEADER_NAMES.get(f, f) + (f" [{FIELDS[f][0]}]" if FIELDS[f][0] else "") for f in fields)
        )
    for g in gpus:
        cells = []
        for f in fields:
            unit, value = FIELDS[f]
            cells.append(f"{value(g)} {unit}" if units and unit else value(g))
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


def list_gpus(gpus: list[Gpu]) -> str:
    return "".join(f"GPU {g.index}: {NAME} (UUID: {g.uuid})\n" for g in gpus)


def summary_table(gpus: list[Gpu], now: float) -> str:
    """The plain `nvidia-smi` table (driver 550 layout)."""
    bar = "+-----------------------------------------+------------------------+----------------------+"
    out = [
        time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)),
        "+" + "-" * 89 + "+",
        f"| NVIDIA-SMI {DRIVER:<22} Driver Version: {DRIVER:<14} CUDA Version: {CUDA:<9}|",
        "|" + bar[1:],
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    for g in gpus:
        mem = (
            f"{g.mem_used:.0f}MiB / {MEM_TOTAL_MIB}MiB " if not g.over_total else f"OVER {g.mem_used:.0f}MiB "
        )
        out.append(
            _row(
                _cell(f"   {g.index}  {NAME}", "On  ", 41),
                _cell("", f"{g.bus_id} Off ", 24),
                _cell("", "0 ", 22),
            )
        )
        power = f"{g.power:.0f}W / {POWER_LIMIT_W:.0f}W "
        util = _cell(f" {g.util:>6.0f}%", "Default ", 22)
        out.append(_row(_cell(f" N/A   {g.temp:.0f}C    P0", power, 41), _cell("", mem, 24), util))
        out.append(_row(" " * 41, " " * 24, _cell("", "Disabled ", 22)))
        out.append(bar)
    out += [
        "",
        "+" + "-" * 89 + "+",
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
    ]
    rows = [(g.index, pid, g.mem_used / max(1, len(g.pids))) for g in gpus for pid in g.pids]
    if not rows:
        out.append("|  No running processes found" + " " * 61 + "|")
    for gpu_index, pid, used in rows:
        out.append(
            _row(_cell(f"  {gpu_index:>3}   N/A  N/A  {pid:>9}      C   python3", f"{used:.0f}MiB ", 89))
        )
    out.append("+" + "-" * 89 + "+")
    return "\n".join(out) + "\n"


def _row(*cells: str) -> str:
    return "|" + "|".join(cells) + "|"


def _cell(left: str, right: str, width: int) -> str:
    return left + " " * max(1, width - len(left) - len(right)) + right


def main(argv: list[str] | None = None, *, now: float | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    now = time.time() if now is None else now
    gpus = gpu_table(read_loads(os.environ.get(ENV_DIR), now), now)
    admin = gpu_admin.admin_main(argv, gpus)  # -pl, --query-compute-apps
    if admin is not None:
        return admin
    query, fmt, only = None, None, None
    it = iter(argv)
    for arg in it:
        if arg.startswith("--query-gpu="):
            query = arg.split("=", 1)[1]
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg in ("-i", "--id"):
            only = next(it, "")
        elif arg.startswith("--id="):
            only = arg.split("=", 1)[1]
        elif arg in ("-L", "--list-gpus"):
            sys.stdout.write(list_gpus(gpus))
            return 0
        else:
            print(f'Invalid combination of input arguments. Please run "nvidia-smi -h" for help. ({arg})')
            return 2
    if only is not None:
        wanted = {int(x) for x in only.split(",") if x.strip().isdigit()}
        gpus = [g for g in gpus if g.index in wanted]
        if not gpus:
            print(f"No devices were found matching the id {only!r}")
            return 6
    if query is None:
        sys.stdout.write(summary_table(gpus, now))
        return 0
    fields = [f.strip() for f in query.split(",") if f.strip()]
    for f in fields:
        if f not in FIELDS:
            print(f'Field "{f}" is not a valid field to query.\n')
            return 2
    opts = {o.strip() for o in (fmt or "").split(",")}
    if "csv" not in opts:
        print('"--format" option requires "csv" (the only format this simulated nvidia-smi prints).')
        return 2
    sys.stdout.write(query_csv(gpus, fields, header="noheader" not in opts, units="nounits" not in opts))
    return 0


def write_shim(bin_dir: Path, python: str | None = None) -> Path:
    """An executable `nvidia-smi` in bin_dir running this module with the given Python."""
    import shlex

    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "nvidia-smi"
    shim.write_text(
        "#!/bin/sh\n# simulated nvidia-smi (specdebug demo box)\n"
        f'exec {shlex.quote(python or sys.executable)} -m specdebug.sim.box.nvidia_smi "$@"\n'
    )
    shim.chmod(0o755)
    return shim


if __name__ == "__main__":
    sys.exit(main())
