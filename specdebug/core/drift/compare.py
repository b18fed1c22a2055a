"""What differs between two drift snapshots, each change one line naming what and how.

Current clocks and the load move with the work itself, so they are not compared (a snapshot still
shows them); settings are: power limits, max clocks, persistence, ECC, driver and CUDA versions,
governors.  A side without a snapshot (an older result, a failed snapshot) gives "cannot tell".
"""

from __future__ import annotations

from typing import Any

GPU_SETTINGS = {
    "power.limit": ("power limit", " W"),
    "power.default_limit": ("default power limit", " W"),
    "clocks.max.sm": ("max SM clock", " MHz"),
    "persistence_mode": ("persistence", ""),
    "ecc.mode.current": ("ECC", ""),
    "name": ("model", ""),
}


def _num(text: str) -> str:
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def usable(snap: Any) -> bool:
    return isinstance(snap, dict) and "error" not in snap and "packages" in snap


def _packages(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    pa, pb = a.get("packages") or {}, b.get("packages") or {}
    out = [f"package {k} {pa[k]} -> {pb[k]}" for k in sorted(pa) if k in pb and pa[k] != pb[k]]
    out += [f"package {k} {pb[k]} added" for k in sorted(pb) if k not in pa]
    out += [f"package {k} {pa[k]} removed" for k in sorted(pa) if k not in pb]
    return out


def _modified(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    def files(s: dict[str, Any]) -> dict[tuple[str, str], str]:
        return {(m["package"], m["file"]): m["why"] for m in s.get("modified") or []}

    fa, fb = files(a), files(b)
    out = [f"{f} modified ({pkg}: {why})" for (pkg, f), why in sorted(fb.items()) if (pkg, f) not in fa]
    out += [f"{f} restored to its RECORD ({pkg})" for (pkg, f) in sorted(fa) if (pkg, f) not in fb]
    if b.get("unchecked_files"):
        out.append(f"cannot tell for {b['unchecked_files']} installed files (not hashed within the budget)")
    return out


def _by_path(items: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    return {str(i.get("path")): i for i in items or []}


def _files(a: dict[str, Any], b: dict[str, Any], key: str, what: str) -> list[str]:
    fa, fb = _by_path(a.get(key)), _by_path(b.get(key))
    out = []
    for path, item in fb.items():
        kind = item.get("kind", what)
        if path not in fa:
            out.append(f"{path} added ({kind}: {item.get('first') or (item.get('lines') or [''])[0]})")
        elif fa[path].get("sha256") != item.get("sha256"):
            out.append(f"{path} changed ({kind})")
    out += [f"{path} removed ({fa[path].get('kind', what)})" for path in fa if path not in fb]
    return out


def _gpus(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    ga = {g.get("index"): g for g in a.get("gpus") or []}
    gb = {g.get("index"): g for g in b.get("gpus") or []}
    out = []
    for idx, g in gb.items():
        old = ga.get(idx)
        if old is None:
            out.append(f"GPU {idx} appeared")
            continue
        for field, (label, unit) in GPU_SETTINGS.items():
            if field in g and field in old and g[field] != old[field]:
                out.append(f"GPU {idx} {label} {_num(old[field])} -> {_num(g[field])}{unit}")
    out += [f"GPU {idx} gone" for idx in ga if idx not in gb]
    for key, label in (("driver_version", "driver"), ("cuda_version", "CUDA")):
        if a.get(key) and b.get(key) and a[key] != b[key]:
            out.append(f"{label} {a[key]} -> {b[key]}")
    if a.get("gpus") is None or b.get("gpus") is None:
        out.append("GPU settings: cannot tell (nvidia-smi gave no table on one side)")
    return out


def _system(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = []
    if a.get("cpu_governor") != b.get("cpu_governor"):
        out.append(f"CPU governor {a.get('cpu_governor') or '-'} -> {b.get('cpu_governor') or '-'}")
    pa, pb = a.get("gpu_processes"), b.get("gpu_processes")
    if isinstance(pa, list) and isinstance(pb, list) and len(pa) != len(pb):
        out.append(f"processes on the GPUs {len(pa)} -> {len(pb)}")
    ia, ib = a.get("python") or {}, b.get("python") or {}
    if ia.get("executable") != ib.get("executable") or ia.get("version") != ib.get("version"):
        out.append(
            f"interpreter {ia.get('executable')} {ia.get('version')} -> {ib.get('executable')} {ib.get('version')}"
        )
    return out


def drift_lines(a: Any, b: Any) -> list[str]:
    """What changed from snapshot a to snapshot b (empty: nothing that is compared)."""
    if not usable(a) or not usable(b):
        side = "earlier" if not usable(a) else "later"
        why = a.get("error") if isinstance(a, dict) and side == "earlier" else None
        why = why or (b.get("error") if isinstance(b, dict) and side == "later" else None)
        return [f"drift: cannot tell (no snapshot with the {side} result{': ' + why if why else ''})"]
    return [
        *_modified(a, b),
        *_files(a, b, "startup_code", "startup"),
        *_files(a, b, "nccl_conf", "NCCL config"),
        *_gpus(a, b),
        *_packages(a, b),
        *_system(a, b),
    ]
