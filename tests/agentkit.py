"""What the local agent's tests share: an agent folder of the test's own, the CLI, waits with deadlines.

The agent's folder is `$XDG_RUNTIME_DIR/specdebug` (specdebug.agent.paths): each test sets
XDG_RUNTIME_DIR to a temp folder of its own, so its agent is its own and nothing is written in the
real home or the machine's runtime folder.  Every agent a test started (the pid files name them) is
killed at the end, stopped or not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests import clifork

STRAY_ENV = ("SPECDEBUG_NO_AGENT", "SLURM_CONF", "KUBECONFIG")


@contextmanager
def agent_env(**extra: str) -> Iterator[dict[str, str]]:
    """An environment whose agent folder is a new temp folder (short: a socket path fits 108 bytes)."""
    run = Path(tempfile.mkdtemp(prefix="sda-"))
    env = {k: v for k, v in os.environ.items() if k not in STRAY_ENV}
    env.update(XDG_RUNTIME_DIR=str(run), SPECDEBUG_AGENT_IDLE_S="60", **extra)
    try:
        yield env
    finally:
        for pid in agent_pids(env):
            try:
                os.kill(pid, signal.SIGKILL)  # a stopped process ends on SIGKILL too
            except ProcessLookupError:
                pass
        shutil.rmtree(run, ignore_errors=True)


def folder(env: dict[str, str]) -> Path:
    return Path(env["XDG_RUNTIME_DIR"]) / "specdebug"


def agent_pids(env: dict[str, str]) -> list[int]:
    """The pids the agents in this environment's folder wrote (alive or not)."""
    pids = []
    for pid_file in folder(env).glob("*.pid"):
        text = pid_file.read_text().strip() if pid_file.is_file() else ""
        if text.isdigit():
            pids.append(int(text))
    return pids


def sd(env: dict[str, str], *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it; TimeoutExpired (a failed test) when it hangs past `timeout`."""
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def status(env: dict[str, str]) -> dict[str, Any]:
    return json.loads(sd(env, "agent", "status", "--json").stdout)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """`check()`'s first truthy value; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)


def wait_kept(env: dict[str, str], host: str) -> dict[str, Any]:
    """The agent's status once it keeps `host` connected."""

    def kept() -> dict[str, Any] | None:
        got = status(env)
        hosts = got.get("hosts", [])
        return got if any(h["host"] == host and h["state"] == "connected" for h in hosts) else None

    return wait_for(f"the agent keeps {host}", kept)


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
