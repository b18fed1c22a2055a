"""What can move a number without being a profile knob, snapshotted ON THE BOX under the server's
own interpreter: `python -S -c SOURCE ARGS_JSON` (remote.boxcode.python_argv), one framed JSON line.

Why under the server's interpreter: its sys.path is what the server imports from, so its package
versions, its installed files and its start-up code (sitecustomize, usercustomize, .pth lines that
run code) are the ones that count.  Why -S: `site` would run every .pth `import` line and the
sitecustomize of the box user at each snapshot; instead the site folders are worked out here as
site.main() would (venv, user site, .pth path lines) and the start-up files are read, never run.

Installed files are checked against their wheel's RECORD (sha256, size): a size that differs needs
no hash; a hash is kept in a cache file keyed by path, size and mtime, so a snapshot after the
first hashes only what changed (`budget` caps the bytes of non-.py files hashed in one run; files
left over are counted as unchecked, never reported clean).  Every file is read safely: regular
files only (a FIFO or a device named in a RECORD is reported, never opened for reading), opened
non-blocking, each read bounded in bytes, each hash in time (FILE_TIME_S), all of them together by
`time_budget`; what was skipped is named.  Besides: NCCL config files, nvidia-smi (driver, CUDA,
clocks, power limits, persistence, ECC, compute processes), the CPU frequency governor and the
load.  Stdlib only, Python >= 3.7.

Args JSON: {"cache": path or "", "stale_cache": path or "", "budget": bytes, "time_budget": s,
"nccl_conf": [paths], "nvidia_smi": argv0}
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from typing import Any

FRAME = "@@specdebug@@"  # remote/boxcode.FRAME: the reply line, told apart from stray output
MAX_LIST = 200  # modified files, startup files, processes, skipped files: at most this many listed
MAX_TEXT = 200  # characters of one quoted line
DEFAULT_BUDGET = 1 << 30
DEFAULT_TIME_BUDGET_S = 20.0  # all file reads and hashes of one snapshot together
FILE_TIME_S = 5.0  # one file's hash
SMI_TIMEOUT_S = 10.0  # one nvidia-smi call
MAX_RECORD_BYTES = 16 << 20  # one RECORD (torch's is ~3 MB)
MAX_SMALL_BYTES = 1 << 20  # METADATA headers, a .pth, a start-up file, an NCCL config, pyvenv.cfg
MAX_CACHE_BYTES = 64 << 20
CHUNK = 1 << 20
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
KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


class NotRegular(OSError):
    """A path that is not a regular file: never read (a FIFO would block, a device never end)."""


class OverTime(Exception):
    """A read that ran past its time budget."""


def _cut(text: str) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text.strip())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


def kind_of(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_regular(path: str) -> int:
    """A descriptor of `path` when it is a regular file (checked on the open file: no race with a
    swap after a stat).  O_NONBLOCK: opening a FIFO does not wait for a writer."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegular(f"{kind_of(st.st_mode)}, not read")
    return fd


class Budget:
    """The snapshot's deadline for file work, and the files it skipped (named)."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.skipped: list[dict[str, str]] = []
        self.skipped_count = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def skip(self, path: str, why: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_LIST:
            self.skipped.append({"path": path, "why": _cut(why)})


def read_bounded(path: str, cap: int) -> bytes:
    """At most `cap` bytes of a regular file (ValueError when it holds more)."""
    fd = open_regular(path)
    try:
        parts, got = [], 0
        while got <= cap:
            chunk = os.read(fd, min(CHUNK, cap + 1 - got))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    if got > cap:
        raise ValueError(f"over {cap} bytes, not read")
    return b"".join(parts)


def read_text(path: str, cap: int = MAX_SMALL_BYTES) -> str:
    return read_bounded(path, cap).decode("utf-8", "replace")


def file_hash(path: str, budget: Budget | None = None, want: os.stat_result | None = None) -> str:
    """The urlsafe-base64 sha256 RECORD uses; OverTime past FILE_TIME_S or the budget's deadline."""
    until = time.monotonic() + FILE_TIME_S
    if budget is not None:
        until = min(until, budget.deadline)
    fd = open_regular(path)
    try:
        st = os.fstat(fd)
        if want is not None and (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
            raise NotRegular("replaced while read")
        h = hashlib.sha256()
        while True:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            h.update(chunk)
            if time.monotonic() > until:
                raise OverTime()
    finally:
        os.close(fd)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


class HashCache:
    """sha256 of files by (path, size, mtime_ns), kept in one JSON file between snapshots: 0600 in a
    0700 folder (its keys are every installed path of the user's interpreters)."""

    def __init__(self, path: str, budget: int, clock: Budget | None = None) -> None:
        self.path = path
        self.budget = budget
        self.clock = clock or Budget(DEFAULT_TIME_BUDGET_S)
        self.hashed_bytes = 0
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        if path:
            try:
                data = json.loads(read_bounded(path, MAX_CACHE_BYTES).decode("utf-8"))
                if isinstance(data, dict):
                    self.entries = data
            except (OSError, ValueError):
                pass

    def digest(self, path: str, st: os.stat_result) -> str | None:
        """The file's hash (None: over the byte or time budget, not hashed)."""
        hit = self.entries.get(path)
        if isinstance(hit, list) and len(hit) == 3 and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return str(hit[2])
        if self.hashed_bytes + st.st_size > self.budget and not path.endswith(".py"):
            return None  # sources are always hashed: a local patch is most likely there
        if self.clock.left() <= 0:
            return None
        try:
            digest = file_hash(path, self.clock, st)
        except OverTime:
            self.clock.skip(path, f"hashing took over {FILE_TIME_S:g} s or the snapshot's time budget")
            return None
        self.hashed_bytes += st.st_size
        self.entries[path] = [st.st_size, st.st_mtime_ns, digest]
        self.dirty = True
        return digest

    def save(self, stale: str = "") -> None:
        if stale and stale != self.path:
            _remove_own_file(stale)  # the cache's old place (0644 in ~/.specdebug): gone
        if not (self.path and self.dirty):
            return
        folder = os.path.dirname(self.path) or "."
        _private_folder(folder)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.entries, fh, separators=(",", ":"))
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def _private_folder(folder: str) -> None:
    """The cache's own folder: created 0700; one that is ours but wider is narrowed; another
    user's, or a symlink, is refused (OSError)."""
    os.makedirs(os.path.dirname(folder.rstrip("/")) or "/", exist_ok=True)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{folder} is not a folder of this user's")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(folder, 0o700)


def _remove_own_file(path: str) -> None:
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
            os.unlink(path)
    except OSError:
        pass


def _metadata(dist_info: str) -> tuple[str, str]:
    name, version = "", ""
    try:
        for line in read_text(os.path.join(dist_info, "METADATA"), MAX_SMALL_BYTES * 16).splitlines():
            if not line.strip():
                break
            if line.startswith("Name:"):
                name = line[5:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
    except (OSError, ValueError):
        pass
    if not name:  # name-version.dist-info
        base = os.path.basename(dist_info)[: -len(".dist-info")]
        name, _, version = base.partition("-")
    return name, version


def _bytecode(rel: str) -> bool:
    """A compiled file the interpreter regenerates: `__pycache__/*.pyc` (some wheels list theirs in RECORD,
    numpy does; the real vLLM venv showed numpy's conv_template.cpython-311.pyc as "modified")."""
    return rel.endswith((".pyc", ".pyo")) or "__pycache__/" in rel


def _check_record(site: str, dist_info: str, name: str, cache: HashCache, out: dict[str, Any]) -> None:
    record = os.path.join(dist_info, "RECORD")
    try:
        rows = read_text(record, MAX_RECORD_BYTES).splitlines()
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        cache.clock.skip(record, str(exc))
        return
    for row in rows:
        parts = row.rsplit(",", 2)
        if len(parts) != 3 or not parts[1].startswith("sha256="):
            continue  # RECORD itself, .pyc files: no hash recorded
        rel, want, size = parts[0].strip('"'), parts[1][7:], parts[2]
        if _bytecode(
            rel
        ):  # the interpreter rewrites it (a new Python, a changed source): not an install's edit
            out["bytecode_skipped"] = out.get("bytecode_skipped", 0) + 1
            continue
        path = os.path.normpath(os.path.join(site, rel))
        if cache.clock.left() <= 0:
            out["unchecked_files"] += 1
            continue
        try:
            st = os.stat(path)
        except OSError:
            _modified(out, name, rel, "missing")
            continue
        if not stat.S_ISREG(st.st_mode):
            _modified(out, name, rel, f"{kind_of(st.st_mode)}, not a regular file (not read)")
            cache.clock.skip(path, f"{kind_of(st.st_mode)}, not read")
            continue
        out["checked_files"] += 1
        if size.isdigit() and int(size) != st.st_size:
            _modified(out, name, rel, f"size {size} -> {st.st_size}")
            continue
        try:
            got = cache.digest(path, st)
        except OSError as exc:
            out["checked_files"] -= 1
            out["unchecked_files"] += 1
            cache.clock.skip(path, exc.strerror or str(exc))
            continue
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
    return {"path": path, "kind": kind, "sha256": file_hash(path), "size": st.st_size, "first": _cut(first)}


def _lines(path: str) -> list[str]:
    try:
        return read_text(path).splitlines()
    except (OSError, ValueError):
        return []


def _code_lines(path: str, pth: bool) -> list[str]:
    lines = _lines(path)
    if pth:  # site.py runs the lines that start with "import" (the rest are path entries)
        return [ln for ln in lines if ln.startswith(("import ", "import\t"))]
    return [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _venv() -> tuple[str, bool] | None:
    """(venv prefix, include-system-site-packages) when the interpreter is a venv's (site.venv)."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    prefix = os.path.dirname(exe_dir)
    for conf in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(prefix, "pyvenv.cfg")):
        if not os.path.isfile(conf):
            continue
        system_site = True
        for line in _lines(conf):
            key, eq, value = line.partition("=")
            if eq and key.strip().lower() == "include-system-site-packages":
                system_site = value.strip().lower() == "true"
        return prefix, system_site
    return None


def site_folders() -> list[str]:
    """The folders site.main() would add and read .pth files in, in its order (run under -S, so
    site's own code and every .pth line did not run)."""
    import site  # with -S its main() does not run on import

    prefixes = [sys.prefix, sys.exec_prefix]
    folders: list[str] = []
    venv = _venv()
    user_ok = site.check_enableusersite()
    if venv is not None:
        folders += site.getsitepackages([venv[0]])
        if venv[1]:
            prefixes.insert(0, venv[0])
        else:
            prefixes, user_ok = [venv[0]], False
    if user_ok:
        folders.append(site.getusersitepackages())
    folders += site.getsitepackages(prefixes)
    out: list[str] = []
    for d in folders:
        d = os.path.abspath(d)
        if d not in out and os.path.isdir(d):
            out.append(d)
    return out


def import_path() -> tuple[list[str], list[str]]:
    """(sys.path as the server starts with it, the site folders among it): the interpreter's own
    entries (PYTHONPATH included), then each site folder and the path lines of its .pth files."""
    path: list[str] = []

    def add(d: str) -> None:
        d = os.path.abspath(d or os.getcwd())
        if d not in path and os.path.isdir(d):
            path.append(d)

    for d in sys.path:
        add(d)
    sites = site_folders()
    for site_dir in sites:
        add(site_dir)
        for name in _pth_files(site_dir):
            for line in _lines(os.path.join(site_dir, name)):
                if line.startswith("#") or not line.strip() or line.startswith(("import ", "import\t")):
                    continue
                add(os.path.join(site_dir, line.rstrip()))
    return path, sites


def _pth_files(site_dir: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(site_dir) if n.endswith(".pth") and not n.startswith("."))
    except OSError:
        return []


def python_side(cache: HashCache) -> dict[str, Any]:
    """Packages and their modified files, and the code that would run at interpreter start."""
    out: dict[str, Any] = {
        "packages": {},
        "modified": [],
        "modified_count": 0,
        "checked_files": 0,
        "unchecked_files": 0,
        "startup_code": [],
    }
    path, sites = import_path()
    for folder in path:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in names:
            full = os.path.join(folder, entry)
            if entry.endswith(".dist-info") and os.path.isdir(full):
                name, version = _metadata(full)
                key = name.lower().replace("_", "-")
                if key in out["packages"]:
                    continue  # shadowed by an earlier sys.path entry: not what imports
                out["packages"][key] = version
                _check_record(folder, full, key, cache, out)
            elif entry in ("sitecustomize.py", "usercustomize.py") or (
                entry.endswith(".pth") and folder in sites
            ):
                code = _code_lines(full, entry.endswith(".pth"))
                if code and len(out["startup_code"]) < MAX_LIST:
                    kind = "pth" if entry.endswith(".pth") else entry[: -len(".py")]
                    try:
                        out["startup_code"].append(_startup_file(full, kind, code[0]))
                    except (OSError, OverTime) as exc:
                        cache.clock.skip(full, str(exc) or "not read")
    return out


def _run(argv: list[str], timeout: float = SMI_TIMEOUT_S) -> tuple[int, str]:
    try:
        p = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {timeout:g} s"
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return p.returncode, p.stdout[: 4 << 20].decode("utf-8", "replace")


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
        if rc in (124, 127):
            return out  # hung or missing: not asked twice more
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


def system_side(nccl_conf: list[str], budget: Budget) -> dict[str, Any]:
    """NCCL config files, CPU frequency governors (count per governor), load and CPU count."""
    confs = []
    for path in nccl_conf:
        path = os.path.expanduser(path)
        if not os.path.lexists(path):
            continue
        try:
            lines = [
                ln for ln in read_text(path).splitlines() if ln.strip() and not ln.lstrip().startswith("#")
            ]
            confs.append(
                {"path": path, "sha256": file_hash(path, budget), "lines": [_cut(x) for x in lines[:50]]}
            )
        except (OSError, ValueError, OverTime) as exc:
            budget.skip(path, str(exc) or "not read")
    governors: dict[str, int] = {}
    base = "/sys/devices/system/cpu"
    try:
        cpus = sorted(d for d in os.listdir(base) if d.startswith("cpu") and d[3:].isdigit())
    except OSError:
        cpus = []
    for cpu in cpus:
        try:
            gov = read_text(os.path.join(base, cpu, "cpufreq", "scaling_governor"), 4096).strip()
        except (OSError, ValueError):
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
    budget = Budget(float(req.get("time_budget") or DEFAULT_TIME_BUDGET_S))
    cache = HashCache(
        cache_file(str(req.get("cache") or "")), int(req.get("budget") or DEFAULT_BUDGET), budget
    )
    out: dict[str, Any] = {
        "t": t0,
        "python": {
            "executable": sys.executable,
            "version": sys.version.split()[0],
            "prefix": sys.prefix,
            "site": "not run (python -S): start-up files were read, none of their code ran",
        },
    }
    out.update(python_side(cache))
    out.update(system_side([str(p) for p in req.get("nccl_conf") or []], budget))
    out.update(gpu_side(str(req.get("nvidia_smi") or "nvidia-smi"), errors))
    try:
        cache.save(cache_file(str(req.get("stale_cache") or "")))
    except OSError as exc:
        errors.append(f"hash cache not saved: {exc}")
    if budget.left() <= 0:
        errors.append(f"file checks stopped at the {budget.seconds:g} s time budget; the rest are unchecked")
    out["skipped"] = budget.skipped
    out["skipped_count"] = budget.skipped_count
    out["hashed_bytes"] = cache.hashed_bytes
    out["errors"] = errors
    out["took_s"] = round(time.time() - t0, 4)
    return out


def main(argv: list[str]) -> int:
    req = json.loads(argv[1]) if len(argv) > 1 else {}
    reply = json.dumps(snapshot(req if isinstance(req, dict) else {}))
    sys.stdout.write("\n" + FRAME + reply + "\n")  # on a line of its own, whatever was printed before
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
