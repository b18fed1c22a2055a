"""A py-spy record of the schedulers as shares of the time per function and per path, and two
records compared function by function (the 2-step vs the 3-step config, or a bisection's ends).

Shares are inclusive (a function's samples include its callees), summed over all ranks and
divided by all main-thread samples, so "verify 83 %" reads as "83 % of the ranks' time was spent
under verify".  A path (draft, verify, decode, ...) takes the largest share of its names: its
names are nested calls, adding them would count one sample twice.
"""

from __future__ import annotations

from typing import Any

PATHS: dict[str, tuple[str, ...]] = {
    "draft": ("draft",),
    "verify": ("verify",),
    "extend forward": ("forward_extend",),
    "decode forward": ("forward_decode",),
    "CUDA graph replay": ("replay",),
    "NCCL wait": ("all_reduce", "pynccl_all_reduce", "all_gather", "broadcast", "barrier"),
    "idle": ("recv_requests",),
}


def _name(label: str) -> str:
    return label.split(" (", 1)[0].rsplit(".", 1)[-1]


def summarize(per_pid: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{"total", "functions": {label: share}, "paths": {path: share}} over every rank's samples."""
    total = 0
    counts: dict[str, int] = {}
    for rec in per_pid.values():
        if "error" in rec:
            continue
        total += int(rec.get("total") or 0)
        for label, n in (rec.get("functions") or {}).items():
            counts[label] = counts.get(label, 0) + int(n)
    shares = {k: v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])} if total else {}
    paths = {}
    for path, names in PATHS.items():
        hits = [s for label, s in shares.items() if _name(label) in names]
        paths[path] = max(hits) if hits else 0.0
    return {"total": total, "functions": shares, "paths": paths}


def compare(a: dict[str, Any], b: dict[str, Any], top: int = 30) -> dict[str, Any]:
    """Function by function and path by path: share in a, in b, change in percentage points."""
    fa, fb = a.get("functions") or {}, b.get("functions") or {}
    rows = [
        {
            "function": k,
            "a": fa.get(k, 0.0),
            "b": fb.get(k, 0.0),
            "delta_pp": (fb.get(k, 0.0) - fa.get(k, 0.0)) * 100,
        }
        for k in {*fa, *fb}
    ]
    rows.sort(key=lambda r: -abs(r["delta_pp"]))
    pa, pb = a.get("paths") or {}, b.get("paths") or {}
    paths = [
        {
            "path": p,
            "a": pa.get(p, 0.0),
            "b": pb.get(p, 0.0),
            "delta_pp": (pb.get(p, 0.0) - pa.get(p, 0.0)) * 100,
        }
        for p in PATHS
    ]
    return {"paths": paths, "functions": rows[:top]}
