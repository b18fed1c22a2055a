"""One drift snapshot as human lines: what `specdebug drift` prints and the TUI's drift view shows.

Kept in core so both front ends render the same snapshot (core.drift.snapshot.take_snapshot) the same way.
"""

from __future__ import annotations

from typing import Any

from specdebug.engines import ENGINES

KEY_PACKAGES = (
    *(e.package for e in ENGINES.values()),
    "torch",
    "flashinfer-python",
    "triton",
    "nvidia-nccl-cu12",
    "transformers",
)


def describe(s: dict[str, Any]) -> list[str]:
    """Human lines of one snapshot (what the JSON holds, shortened)."""
    py = s.get("python") or {}
    interp = s.get("interpreter") or {}
    lines = [
        f"interpreter {py.get('executable')} (Python {py.get('version')}, {interp.get('found_by', '?')})"
    ]
    pk = s.get("packages") or {}
    have = [f"{k} {pk[k]}" for k in KEY_PACKAGES if k in pk]
    lines.append(f"packages: {len(pk)}" + (f" ({', '.join(have)})" if have else ""))
    lines.append(
        f"installed files: {s.get('checked_files', 0)} checked against RECORD, "
        f"{s.get('modified_count', 0)} differ, {s.get('unchecked_files', 0)} not checked (budget)"
    )
    lines += [f"  modified {m['file']} ({m['package']}: {m['why']})" for m in s.get("modified") or []]
    lines += [f"  skipped {k.get('path')}: {k.get('why')}" for k in s.get("skipped") or []]
    if (s.get("skipped_count") or 0) > len(s.get("skipped") or []):
        lines.append(f"  ... {s['skipped_count'] - len(s['skipped'])} more files skipped")
    lines += [
        f"start-up code {c['kind']} (read, not run): {c['path']}: {c['first']}"
        for c in s.get("startup_code") or []
    ]
    lines += [f"NCCL config {c['path']}: {'; '.join(c.get('lines') or [])}" for c in s.get("nccl_conf") or []]
    if not s.get("nccl_conf"):
        lines.append("NCCL config files: none")
    lines.append(f"driver {s.get('driver_version') or '?'}, CUDA {s.get('cuda_version') or '?'}")
    for g in s.get("gpus") or []:
        lines.append(
            f"  GPU {g.get('index')} {g.get('name')}: SM {g.get('clocks.sm')}/{g.get('clocks.max.sm')} MHz, "
            f"mem {g.get('clocks.mem')} MHz, power limit {g.get('power.limit')} W "
            f"(default {g.get('power.default_limit')}), persistence {g.get('persistence_mode')}, "
            f"ECC {g.get('ecc.mode.current')}"
        )
    procs = s.get("gpu_processes")
    lines.append(f"processes on the GPUs: {'cannot tell' if procs is None else len(procs)}")
    gov = s.get("cpu_governor") or {}
    lines.append(f"CPU governor: {', '.join(f'{k} x{v}' for k, v in gov.items()) or 'not readable'}")
    load = s.get("load") or []
    lines.append(f"load {' '.join(f'{x:.2f}' for x in load)} on {s.get('cpu_count')} CPUs")
    lines += [f"note: {e}" for e in s.get("errors") or []]
    lines.append(f"(snapshot took {s.get('took_s')} s, {s.get('hashed_bytes', 0)} bytes hashed)")
    return lines
