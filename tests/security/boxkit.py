"""Helpers for the hostile-box tier: run the real CLI against the loopback sshd, write profiles,
clean up servers the tests launched (by their recorded group, only when it is still ours)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from tests import clifork

# what a terminal could act on: C0 except \n and \t (ESC included), DEL, C1, bidi controls
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def state_dir() -> Path:
    """The box-side server records of the running test (tests/conftest.py sets a folder per test)."""
    return Path(os.environ.get("SPECDEBUG_STATE_DIR") or Path.home() / ".specdebug" / "servers")


def run(
    sshd, verb: str, *args: str, timeout: float = 120, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`specdebug VERB -F <test ssh config> ARGS...`, output kept as bytes."""
    cmd = [sys.executable, "-m", "specdebug.cli", verb]
    if verb not in ("history", "report", "mark"):  # the local verbs take no ssh options
        cmd += ["-F", str(sshd.config_path)]
    full_env = {**os.environ, **(env or {})}
    return clifork.run([*cmd, *args], capture_output=True, timeout=timeout, env=full_env)


def assert_terminal_safe(data: bytes, what: str) -> str:
    """The bytes decode as UTF-8 and hold nothing a terminal would act on; returns the text."""
    assert b"\x1b" not in data, f"{what}: ESC emitted: {data[:400]!r}"
    text = data.decode("utf-8")  # strict
    bad = FORBIDDEN.search(text.replace("\n", "").replace("\t", ""))
    assert bad is None, f"{what}: {bad.group()!r} emitted: {text[:400]!r}"
    return text


def unique(name: str) -> str:
    """Profile names are server record names on a shared box: never collide with a parallel run."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


def write_profile(path: Path, name: str, server: dict, **tables: dict) -> Path:
    """A profile TOML (strings written as JSON strings, which TOML reads the same)."""

    def value(v) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        return json.dumps(v)

    lines = [f"name = {json.dumps(name)}", "[server]"]
    lines += [f"{k} = {value(v)}" for k, v in server.items()]
    for table, body in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{k} = {value(v)}" for k, v in body.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def forget_server(name: str) -> None:
    """Kill what a test launched under profile `name` (its recorded group, if the leader's cmdline
    still names the profile: not a reused PID) and remove its state file."""
    path = state_dir() / f"{name}.json"
    try:
        pgid = int(json.loads(path.read_text())["pgid"])
        leader = Path(f"/proc/{pgid}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError):
        path.unlink(missing_ok=True)
        return
    if pgid > 1 and name.encode() in leader:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    path.unlink(missing_ok=True)
