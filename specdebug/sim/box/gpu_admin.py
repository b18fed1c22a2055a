"""The simulated nvidia-smi's settings side: `-pl` power limits that persist (as on a real box,
until reboot), the settings fields drift snapshots read, and `--query-compute-apps`.

Why apart from sim.box.nvidia_smi: that module draws the GPUs' live state; this one holds what an admin
changes on the box.  Limits live in $SPECDEBUG_SIM_GPU_DIR/power-limits.json (the sims' load dir),
so a test or the demo lowers GPU 3's limit with `nvidia-smi -i 3 -pl 450` and every later query
shows it.  Without that dir set, -pl fails like a box without the permission.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

ENV_DIR = "SPECDEBUG_SIM_GPU_DIR"
LIMITS_FILE = "power-limits.json"
DEFAULT_LIMIT_W = 700.0
MIN_LIMIT_W, MAX_LIMIT_W = 200.0, 700.0
APP_FIELDS = {"gpu_uuid", "pid", "process_name", "used_memory", "gpu_bus_id"}


def _limits_path() -> str | None:
    d = os.environ.get(ENV_DIR)
    return os.path.join(d, LIMITS_FILE) if d else None


def power_limits() -> dict[int, float]:
    path = _limits_path()
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return {int(k): float(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def power_limit(index: int) -> float:
    return power_limits().get(index, DEFAULT_LIMIT_W)


def set_power_limit(indices: list[int], watts: float, bus_id: Callable[[int], str]) -> int:
    path = _limits_path()
    if not path:
        print("Changing power management limit is not supported in current scope for GPU: all.")
        return 4
    if not MIN_LIMIT_W <= watts <= MAX_LIMIT_W:
        print(
            f"Provided power limit {watts:.2f} W is not a valid power limit which should be between "
            f"{MIN_LIMIT_W:.2f} W and {MAX_LIMIT_W:.2f} W for GPU {bus_id(indices[0])}"
        )
        return 2
    limits = power_limits()
    for i in indices:
        print(
            f"Power limit for GPU {bus_id(i)} was set to {watts:.2f} W from {limits.get(i, DEFAULT_LIMIT_W):.2f} W."
        )
        limits[i] = watts
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({str(k): v for k, v in limits.items()}, fh)
    os.replace(tmp, path)
    print("All done.")
    return 0


# extra --query-gpu fields: name -> (unit, value of a sim Gpu)
EXTRA_FIELDS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "power.limit": ("W", lambda g: f"{power_limit(g.index):.2f}"),
    "power.default_limit": ("W", lambda g: f"{DEFAULT_LIMIT_W:.2f}"),
    "enforced.power.limit": ("W", lambda g: f"{power_limit(g.index):.2f}"),
    "clocks.mem": ("MHz", lambda g: "3201" if g.util >= 1.0 else "1593"),
    "clocks.max.mem": ("MHz", lambda g: "3201"),
    "persistence_mode": ("", lambda g: "Enabled"),
    "ecc.mode.current": ("", lambda g: "Enabled"),
}


def compute_apps(gpus: list[Any], query: str, fmt: str) -> int:
    """`--query-compute-apps=...`: one row per (GPU, sim process) that holds memory on it."""
    fields = [f.strip() for f in query.split(",") if f.strip()]
    bad = [f for f in fields if f not in APP_FIELDS]
    if bad:
        print(f'Field "{bad[0]}" is not a valid field to query.\n')
        return 2
    units = "nounits" not in fmt
    rows = []
    for g in gpus:
        share = g.mem_used / max(len(g.pids), 1)
        for pid in g.pids:
            vals = {
                "gpu_uuid": g.uuid,
                "gpu_bus_id": g.bus_id,
                "pid": str(pid),
                "process_name": "python3",
                "used_memory": f"{share:.0f}" + (" MiB" if units else ""),
            }
            rows.append(", ".join(vals[f] for f in fields))
    if "noheader" not in fmt:
        rows.insert(0, ", ".join(fields))
    sys.stdout.write("".join(r + "\n" for r in rows))
    return 0


def admin_main(argv: list[str], gpus: list[Any]) -> int | None:
    """The settings commands (-pl, --query-compute-apps); None: not one of them."""
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-compute-apps=")), None)
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "")
    if query is not None:
        return compute_apps(gpus, query, fmt)
    if "-pl" not in argv and "--power-limit" not in argv:
        return None
    at = argv.index("-pl") if "-pl" in argv else argv.index("--power-limit")
    try:
        watts = float(argv[at + 1])
    except (IndexError, ValueError):
        print("Invalid power limit value.")
        return 2
    ids = [g.index for g in gpus]
    for flag in ("-i", "--id"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            wanted = {int(x) for x in argv[argv.index(flag) + 1].split(",") if x.strip().isdigit()}
            ids = [i for i in ids if i in wanted]
    by_index = {g.index: g for g in gpus}
    return set_power_limit(ids, watts, lambda i: by_index[i].bus_id)
