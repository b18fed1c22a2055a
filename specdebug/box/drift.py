"""What can move a number without being a profile knob, snapshotted ON THE BOX under the server's
own interpreter: `python -c SOURCE ARGS_JSON` (remote.boxcode.python_argv), one JSON line out.

Why under the server's interpreter: its sys.path is what the server imports from, so its package
versions, its installed files and its start-up code (sitecustomize, usercustomize, .pth lines that
run code) are the ones that count.  Installed files are checked against their wheel's RECORD
(sha256, size): a size that differs needs no hash; a hash is kept in a cache file keyed by path,
size and mtime, so a snapshot after the first hashes only what changed (`budget` caps the bytes
of non-.py files hashed in one run; files left over are counted as unchecked, never reported clean).  Besides:
NCCL config files, nvidia-smi (driver, CUDA, clocks, power limits, persistence, ECC, compute
processes), the CPU frequency governor and the load.  Stdlib only, Python >= 3.7.

Args JSON: {"cache": path or "", "budget": bytes, "nccl_conf": [paths], "nvidia_smi": argv0}
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

MAX_LIST = 200  # modified files, startup files, processes: at most this many listed
MAX_TEXT = 200  # characters of one quoted line
DEFAULT_BUDGET = 1 << 30
GPU_FIELDS = (
    "index",
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "power.limit",
    "power.default_limit",
    "persistence_mode",
    "ecc.mode.current",
)
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")


def _cut(text: str) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text.strip())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


class HashCache:
    """sha256 of files by (path, size, mtime_ns), kept in one JSON file between snapshots."""

    def __init__(self, path: str, budget: int) -> None:
        self.path = path
        self.budget = budget
        self.hashed_bytes = 0
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        if path:
            try:
                with open(path, encoding="utf-8") as fh:
                    data = json.load(fh)
                if isinstance(data, dict):
                    self.entries = data
            except (OSError, ValueError):
                pass

    def digest(self, path: str, st: os.stat_result) -> str | None:
        """The file's hash (None: over budget, not hashed)."""
        hit = self.entries.get(path)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return str(hit[2])
        if self.hashed_bytes + st.st_size > self.budget and not path.endswith(".py"):
            return None  # sources are always hashed: a local patch is most likely there
        digest = _file_hash(path)
        self.hashed_bytes += st.st_size
        self.entries[path] = [st.st_size, st.st_mtime_ns, digest]
        self.dirty = True
        return digest

    def save(self) -> None:
        if not (self.path and self.dirty):
            return
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.entries, fh, separators=(",", ":"))
        os.replace(tmp, self.path)


def _site_dirs() -> list[str]:
    seen: list[str] = []
    for d in sys.path:
        d = os.path.abspath(d or os.getcwd())
        if os.path.isdir(d) and d not in seen:
            seen.append(d)
    return seen


def _metadata(dist_info: str) -> tuple[str, str]:
    name, version = "", ""
    try:
        with open(os.path.join(dist_info, "METADATA"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break
                if line.startswith("Name:"):
                    name = line[5:].strip()
                elif line.startswith("Version:"):
                    version = line[8:].strip()
    except OSError:
        pass
    if not name:  # name-version.dist-info
        base = os.path.basename(dist_info)[: -len(".dist-info")]
        name, _, version = base.partition("-")
    return name, version


def _check_record(site: str, dist_info: str, name: str, cache: HashCache, out: dict[str, Any]) -> None:
    try:
        with open(os.path.join(dist_info, "RECORD"), encoding="utf-8", errors="replace") as fh:
            rows = fh.read().splitlines()
    except OSError:
        return
    for row in rows:
        parts = row.rsplit(",", 2)
        if len(parts) != 3 or not parts[1].startswith("sha256="):
            continue  # RECORD itself, .pyc files: no hash recorded
        rel, want, size = parts[0].strip('"'), parts[1][7:], parts[2]
        path = os.path.normpath(os.path.join(site, rel))
        try:
            st = os.stat(path)
        except OSError:
            _modified(out, name, rel, "missing")
            continue
        out["checked_files"] += 1
        if size.isdigit() and int(size) != st.st_size:
            _modified(out, name, rel, f"size {size} -> {st.st_size}")
            continue
        got = cache.digest(path, st)
        if got is None:
            out["checked_files"] -= 1
            out["unchecked_files"] += 1
        elif got != want:
            _modified(out, name, rel, "sha256 differs from RECORD")


def _modified(out: dict[str, Any], package: str, rel: str, why: str) -> None:
    out["modified_count"] += 1
    if len(out["modified"]) < MAX_LIST:
        out["modified"].append({"package": package, "file": rel, "why": why})


def _startup_file(path: str, kind: str, first: str) -> dict[str, Any]:
    st = os.stat(path)
    return {"path": path, "kind": kind, "sha256": _file_hash(path), "size": st.st_size, "first": _cut(first)}


def _code_lines(path: str, pth: bool) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = [ln.rstrip("\n") for ln in fh]
    except OSError:
        return []
    if pth:  # site.py runs the lines that start with "import" (the rest are path entries)
        return [ln for ln in lines if ln.startswith(("import ", "import\t"))]
    return [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def python_side(cache: HashCache) -> dict[str, Any]:
    """Packages and their modified files, and the code that runs at interpreter start."""
    out: dict[str, Any] = {
        "packages": {},
        "modified": [],
        "modified_count": 0,
        "checked_files": 0,
        "unchecked_files": 0,
        "startup_code": [],
    }
    for site in _site_dirs():
        try:
            names = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in names:
            full = os.path.join(site, entry)
            if entry.endswith(".dist-info") and os.path.isdir(full):
                name, version = _metadata(full)
                key = name.lower().replace("_", "-")
                if key in out["packages"]:
                    continue  # shadowed by an earlier sys.path entry: not what imports
                out["packages"][key] = version
                _check_record(site, full, key, cache, out)
            elif entry in ("sitecustomize.py", "usercustomize.py") or entry.endswith(".pth"):
                code = _code_lines(full, entry.endswith(".pth"))
                if code and len(out["startup_code"]) < MAX_LIST:
                    kind = "pth" if entry.endswith(".pth") else entry[: -len(".py")]
                    out["startup_code"].append(_startup_file(full, kind, code[0]))
    return out


def _run(argv: list[str], timeout: float = 10.0) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def _csv(text: str, fields: tuple[str, ...]) -> list[dict[str, str]] | None:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            return None
        rows.append({f: cells[i] for i, f in enumerate(fields)})
    return rows


def gpu_side(smi: str, errors: list[str]) -> dict[str, Any]:
    """nvidia-smi's view: per-GPU settings, compute processes, driver and CUDA versions."""
    out: dict[str, Any] = {"gpus": None, "gpu_processes": None, "driver_version": None, "cuda_version": None}
    q = "--query-gpu=" + ",".join(GPU_FIELDS)
    rc, text = _run([smi, q, "--format=csv,noheader,nounits"])
    rows = _csv(text, GPU_FIELDS) if rc == 0 else None
    if rows is None:
        errors.append("nvidia-smi --query-gpu: " + _cut(text or f"exit {rc}"))
    else:
        out["gpus"] = rows
        out["driver_version"] = rows[0]["driver_version"] if rows else None
    rc, text = _run([smi, "--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits"])
    apps = _csv(text, APP_FIELDS) if rc == 0 else None
    if apps is None:
        errors.append("nvidia-smi --query-compute-apps: " + _cut(text or f"exit {rc}"))
    else:
        out["gpu_processes"] = apps[:MAX_LIST]
    rc, text = _run([smi])
    for part in text.split("CUDA Version:")[1:2]:
        out["cuda_version"] = _cut(part.split()[0]) if part.split() else None
    return out


def system_side(nccl_conf: list[str]) -> dict[str, Any]:
    """NCCL config files, CPU frequency governors (count per governor), load and CPU count."""
    confs = []
    for path in nccl_conf:
        path = os.path.expanduser(path)
        if os.path.isfile(path):
            lines = _code_lines(path, False)
            confs.append({"path": path, "sha256": _file_hash(path), "lines": [_cut(x) for x in lines[:50]]})
    governors: dict[str, int] = {}
    base = "/sys/devices/system/cpu"
    try:
        cpus = sorted(d for d in os.listdir(base) if d.startswith("cpu") and d[3:].isdigit())
    except OSError:
        cpus = []
    for cpu in cpus:
        try:
            with open(os.path.join(base, cpu, "cpufreq", "scaling_governor"), encoding="utf-8") as fh:
                gov = fh.read().strip()
        except OSError:
            continue
        governors[gov] = governors.get(gov, 0) + 1
    try:
        load = [float(x) for x in os.getloadavg()]
    except OSError:
        load = []
    return {"nccl_conf": confs, "cpu_governor": governors, "load": load, "cpu_count": os.cpu_count()}


def cache_file(path: str) -> str:
    """`~/...` in the box user's home; a relative path under that home too, never under the cwd."""
    if not path:
        return ""
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.join(os.path.expanduser("~"), path)


def snapshot(req: dict[str, Any]) -> dict[str, Any]:
    t0 = time.time()
    errors: list[str] = []
    cache = HashCache(cache_file(str(req.get("cache") or "")), int(req.get("budget") or DEFAULT_BUDGET))
    out: dict[str, Any] = {
        "t": t0,
        "python": {"executable": sys.executable, "version": sys.version.split()[0], "prefix": sys.prefix},
    }
    out.update(python_side(cache))
    out.update(system_side([str(p) for p in req.get("nccl_conf") or []]))
    out.update(gpu_side(str(req.get("nvidia_smi") or "nvidia-smi"), errors))
    try:
        cache.save()
    except OSError as exc:
        errors.append(f"hash cache not saved: {exc}")
    out["hashed_bytes"] = cache.hashed_bytes
    out["errors"] = errors
    out["took_s"] = round(time.time() - t0, 4)
    return out


def main(argv: list[str]) -> int:
    req = json.loads(argv[1]) if len(argv) > 1 else {}
    sys.stdout.write(json.dumps(snapshot(req if isinstance(req, dict) else {})) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
