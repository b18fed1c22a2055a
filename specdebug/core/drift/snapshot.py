"""One drift snapshot of the box as the server sees it, taken through the remote layer.

The box module (specdebug/box/drift.py) runs under the profile's own interpreter with the profile's
env, so sys.path, NCCL_CONF_FILE and CUDA_VISIBLE_DEVICES are the server's.  When argv[0] is not a
python (`vllm serve`, `sglang ...` scripts) its shebang names the interpreter.  The hash cache
lives beside the box's server records (the state dir), in a 0700 folder of its own, never in the
client's home.  The box module runs under `python -S` (no .pth line, no sitecustomize runs) and
frames its reply, so a login script's or a wrapper's stray output is skipped and said.
"""

from __future__ import annotations

import json
import os
import posixpath
from typing import Any

from specdebug.core.profiles import Profile
from specdebug.core.secrets import mask_text
from specdebug.remote.api import Remote, RemoteError
from specdebug.remote.boxcode import framed_reply, noise_warning, python_argv

NCCL_CONF = ("/etc/nccl.conf", "~/.nccl.conf")
DEFAULT_STATE = "~/.specdebug/servers"
MAX_REPLY = 4 << 20
FILE_TIME_BUDGET_S = 20.0  # the box module's reads and hashes, all together (box/drift.py)
TIMEOUT_S = 60.0  # that, three bounded nvidia-smi calls (10 s each) and the interpreter's start


def _is_python(arg0: str) -> bool:
    return posixpath.basename(arg0).startswith("python")


async def interpreter(remote: Remote, profile: Profile) -> tuple[str, str]:
    """(interpreter path on the box, how it was found)."""
    arg0 = profile.server.argv[0]
    if _is_python(arg0):
        return arg0, "the profile's argv[0]"
    script = 'p=$(command -v -- "$1") && head -c 300 -- "$p"'
    try:
        res = await remote.run(["sh", "-c", script, "sh", arg0], timeout=15, env=profile.server.env or None)
    except RemoteError:
        return "python3", f"python3 ({arg0} not readable on the box)"
    first = res.out.splitlines()[0] if res.ok and res.out else ""
    if first.startswith("#!"):
        parts = first[2:].split()
        if parts and posixpath.basename(parts[0]) == "env" and len(parts) > 1:
            parts = parts[1:]
        if parts and _is_python(parts[0]):
            return parts[0], f"the shebang of {arg0}"
    return "python3", f"python3 ({arg0} is not a python script)"


def _state_parent(remote: Remote) -> str:
    state = remote.state_dir or os.environ.get("SPECDEBUG_STATE_DIR") or DEFAULT_STATE
    return posixpath.dirname(state.rstrip("/")) or "."


def cache_path(remote: Remote) -> str:
    """Beside the box's server records: under the remote's state dir's parent, else
    $SPECDEBUG_STATE_DIR's (what an SSH box client reads too; a test box gets the test's folder),
    else ~/.specdebug; in a `drift` folder of its own, 0700 (the file is 0600): its keys name every
    installed file of the user's interpreters."""
    return posixpath.join(_state_parent(remote), "drift", "drift-cache.json")


def stale_cache_path(remote: Remote) -> str:
    """Where the cache was kept before (0644 in a shared folder): the box module removes it."""
    return posixpath.join(_state_parent(remote), "drift-cache.json")


async def take_snapshot(remote: Remote, profile: Profile, *, budget: int | None = None) -> dict[str, Any]:
    """The snapshot (a dict, box figures bounded by the box module); RemoteError when none came."""
    interp, how = await interpreter(remote, profile)
    env = dict(profile.server.env)
    confs = [*NCCL_CONF, *([env["NCCL_CONF_FILE"]] if env.get("NCCL_CONF_FILE") else [])]
    req: dict[str, Any] = {
        "cache": cache_path(remote),
        "stale_cache": stale_cache_path(remote),
        "nccl_conf": confs,
        "time_budget": FILE_TIME_BUDGET_S,
    }
    if budget is not None:
        req["budget"] = budget
    argv = python_argv("drift.py", json.dumps(req), flags=("-S",))  # -S: no .pth line runs
    argv[0] = interp
    try:
        res = await remote.run(argv, timeout=TIMEOUT_S, env=env or None, cwd=profile.server.cwd)
    except TimeoutError:
        raise RemoteError(f"drift snapshot under {interp}: no answer within {TIMEOUT_S:g} s") from None
    if not res.ok or len(res.stdout) > MAX_REPLY:
        why = (res.err or res.out).strip().splitlines()[-1:] or [f"exit status {res.exit_status}"]
        raise RemoteError(f"drift snapshot under {interp} failed: {why[0][:200]}")
    snap, noise = framed_reply(res.stdout)
    noise = [*res.login_output, *noise]
    if not isinstance(snap, dict):
        raise RemoteError(f"drift snapshot under {interp}: no reply in its output: {res.out[:120]!r}")
    if noise:
        snap.setdefault("errors", []).append(noise_warning(noise))
    snap["interpreter"] = {"path": interp, "found_by": how}
    _mask(snap)
    return snap


def _mask(snap: dict[str, Any]) -> None:
    """Start-up code and NCCL config lines are quoted: a token set in a sitecustomize stays out."""
    for item in snap.get("startup_code") or []:
        if isinstance(item, dict) and isinstance(item.get("first"), str):
            item["first"] = mask_text(item["first"])
    for conf in snap.get("nccl_conf") or []:
        if isinstance(conf, dict) and isinstance(conf.get("lines"), list):
            conf["lines"] = [mask_text(x) if isinstance(x, str) else "" for x in conf["lines"]]


async def snapshot_or_error(remote: Remote, profile: Profile) -> dict[str, Any]:
    """For recording beside a result: the snapshot, or {"error": why} (never raises RemoteError)."""
    try:
        return await take_snapshot(remote, profile)
    except (RemoteError, TimeoutError) as exc:
        return {"error": str(exc) or "timed out"}
