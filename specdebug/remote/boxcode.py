"""Shipping the box-side modules (specdebug.box) to the box as source, and the op bundle.

Why source: a box needs nothing installed; what runs there is exactly the file in this package
(read from the installed package, so a wheel works as well as a checkout).  The resident helper
and the one-shot fallback run the same bundle: the helper module plus the op modules, each
executed as its own module namespace on the box.
"""

from __future__ import annotations

import base64
import json
import zlib
from functools import cache
from importlib import resources
from typing import Any

from specdebug.remote.api import RemoteError, RunResult

# box modules whose OPS the helper serves (and the one-shot fallback answers)
OP_MODULES = ("procctl", "ports", "health")


@cache
def source(name: str) -> str:
    """The text of one file of specdebug/box (`helper.py`, `launch.sh`, ...)."""
    return resources.files("specdebug.box").joinpath(name).read_text(encoding="utf-8")


def _bundle(call: str) -> str:
    """Python text that loads helper.py and the op modules as modules, then runs `call`."""
    parts = [
        "import types",
        "def _load(name, text):",
        "    m = types.ModuleType('specdebug_box_' + name)",
        "    exec(compile(text, '<specdebug.box.' + name + '>', 'exec'), m.__dict__)",
        "    return m",
        f"_helper = _load('helper', {source('helper.py')!r})",
        f"_helper.add_raw_ops(_load('proclist', {source('proclist.py')!r}).RAW_OPS)",
        "_ops = [" + ", ".join(f"_load({n!r}, {source(n + '.py')!r}).OPS" for n in OP_MODULES) + "]",
        call,
    ]
    return "\n".join(parts) + "\n"


# The PID that then becomes the command (exec keeps it), told first in a frame: a python3 that hangs
# before its greeting can be ended by that PID (OpenSSH leaves a no-pty command running on close).
FRAME = "@@specdebug@@"  # box/helper.py's FRAME
SPAWN_SH = 'printf \'%s{"spawned":%s}\\n\' "' + FRAME + '" "$$"; exec "$@"'
SPAWN_ERR_SH = 'printf \'%s{"spawned":%s}\\n\' "' + FRAME + '" "$$" >&2; exec "$@"'


def spawned_pid(data: bytes) -> int | None:
    """The PID a SPAWN_SH / SPAWN_ERR_SH frame told, if `data` holds one."""
    at = data.find(FRAME.encode())
    if at < 0:
        return None
    try:
        told = json.loads(data[at + len(FRAME) :].split(b"\n", 1)[0])
    except ValueError:
        return None
    pid = told.get("spawned") if isinstance(told, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1 else None


SPAWN_WAIT_S = 15.0  # a session slow to start (a loaded box) is given this long to tell its PID
ENDED_GONE, ENDED_STILL_THERE = 0, 3  # end_spawned_argv's exit statuses


def end_spawned_argv(pid: int) -> list[str]:
    """argv ending a command started under SPAWN_SH: its process group when it leads one, and it.
    Exits ENDED_GONE once the PID is gone (or only a zombie waits for its parent), else
    ENDED_STILL_THERE after ~5 s: "ended it" is said only when it is true."""
    # dash's kill refuses `--` ("Illegal number: -"): the group form without it where that fails
    script = (
        'kill -KILL -- "-$1" 2>/dev/null || kill -KILL "-$1" 2>/dev/null; kill -KILL "$1" 2>/dev/null; '
        "i=0; while [ $i -lt 50 ]; do "
        'kill -0 "$1" 2>/dev/null || exit 0; '
        "case $(sed 's/.*) //;s/ .*//' \"/proc/$1/stat\" 2>/dev/null) in ''|Z|X) exit 0;; esac; "
        "sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done; exit 3"
    )
    return ["sh", "-c", script, "sh", str(pid)]


def ended_note(status: int | None) -> str:
    """What end_spawned_argv's exit status says was done."""
    if status == ENDED_GONE:
        return "ended it"
    if status == ENDED_STILL_THERE:
        return "tried to end it: it still runs on the box"
    return f"ending it failed (exit {status})"


@cache
def _helper_argv() -> tuple[str, ...]:
    packed = base64.b64encode(zlib.compress(_bundle("_helper.serve(_ops)").encode(), 9)).decode()
    boot = f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{packed}')))"
    return ("sh", "-c", SPAWN_SH, "sh", "python3", "-u", "-c", boot)


def helper_argv() -> list[str]:
    """The resident helper's argv: python3 -c with the bundle compressed (short in `ps`).

    The boot text carries procctl.HELPER_MARK, by which process control recognizes (and never
    signals) a helper's group."""
    return list(_helper_argv())


@cache
def _once_boot() -> str:
    packed = base64.b85encode(
        zlib.compress(_bundle("_helper.run_once(_ops, __import__('sys').argv[1])").encode(), 9)
    )
    return f"exec(__import__('zlib').decompress(__import__('base64').b85decode('{packed.decode()}')))"


def once_argv(op: str) -> list[str]:
    """argv answering one op without a resident helper (its args go on stdin as JSON)."""
    return ["python3", "-c", _once_boot(), op]


def once_reply(op: str, res: RunResult) -> dict[str, Any]:
    """The result of a one-shot op (once_argv), or RemoteError saying why there is none."""
    if not res.ok:
        why = (res.err or res.out).strip()[:300] or f"exit status {res.exit_status}"
        raise RemoteError(f"box operation {op} failed: {why}")
    reply, _noise = framed_reply(res.stdout)
    if reply is None:
        raise RemoteError(f"box operation {op} answered {res.out.strip()[:200]!r}")
    if not isinstance(reply, dict) or not reply.get("ok") or not isinstance(reply.get("result"), dict):
        raise RemoteError(
            f"box operation {op} failed: {reply.get('error') if isinstance(reply, dict) else reply}"
        )
    result: dict[str, Any] = reply["result"]
    return result


def framed_reply(out: bytes) -> tuple[Any, list[str]]:
    """The last framed JSON line of a one-shot op's stdout (None if there is none) and the lines
    around it that are not ours (a login script's echo, a python3 wrapper's banner)."""
    reply: Any = None
    noise: list[str] = []
    for raw in out.splitlines():
        line = raw.decode("utf-8", "replace")
        at = line.find(FRAME)
        if at < 0:
            if line.strip():
                noise.append(line)
            continue
        if line[:at].strip():
            noise.append(line[:at])
        try:
            reply = json.loads(line[at + len(FRAME) :])
        except ValueError:
            noise.append(line)
    return reply, noise


def noise_warning(noise: list[str]) -> str:
    """One line saying what the box printed outside the protocol (skipped)."""
    sample = noise[0].strip()[:120]
    return (
        f"the box printed {len(noise)} line(s) outside specdebug's protocol, skipped "
        f"(a login script's echo or a python3 wrapper?): {sample!r}"
    )


def python_argv(name: str, *args: str, flags: tuple[str, ...] = ()) -> list[str]:
    """argv running one box module's source as a script: python3 FLAGS -c SOURCE ARGS..."""
    return ["python3", *flags, "-c", source(name), *args]
