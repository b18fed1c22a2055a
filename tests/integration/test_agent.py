"""The local agent over a real sshd: the first probe starts it, the next ones are answered from its kept
connection with the same facts, a dropped connection is reconnected, and `agent stop` ends it.

Each test has its own runtime folder (XDG_RUNTIME_DIR), so its agent is its own; it is stopped at the
end whatever happened (the pid file names it)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests import clifork

pytestmark = pytest.mark.slow


@pytest.fixture
def agent_env():
    run = Path(tempfile.mkdtemp(prefix="sda-"))  # short: a socket path must fit in 108 bytes
    env = {k: v for k, v in os.environ.items() if k != "SPECDEBUG_NO_AGENT"}
    env.update(XDG_RUNTIME_DIR=str(run), SPECDEBUG_AGENT_IDLE_S="60")
    yield env
    for pid_file in (run / "specdebug").glob("*.pid"):
        text = pid_file.read_text().strip()
        if text:
            try:
                os.kill(int(text), signal.SIGKILL)
            except ProcessLookupError:
                pass
    shutil.rmtree(run, ignore_errors=True)


def _sd(env, *argv: str) -> subprocess.CompletedProcess[str]:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *argv], env=env, capture_output=True, text=True, timeout=60
    )


def _wait_kept(env, host: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = json.loads(_sd(env, "agent", "status", "--json").stdout)
        if any(h["host"] == host and h["state"] == "connected" for h in status.get("hosts", [])):
            return status
        time.sleep(0.2)
    raise AssertionError(f"the agent never kept {host}: {status}")


def test_probe_through_the_agent_gives_the_direct_facts(sshd, agent_env):
    cfg = str(sshd.config_path)
    direct = _sd(agent_env, "probe", "-F", cfg, sshd.alias, "--json", "--no-agent")
    assert direct.returncode == 0, direct.stderr
    assert not list(
        (Path(agent_env["XDG_RUNTIME_DIR"]) / "specdebug").glob("*.sock")
    )  # --no-agent starts none
    first = _sd(agent_env, "probe", "-F", cfg, sshd.alias, "--json")
    assert first.returncode == 0, first.stderr
    status = _wait_kept(agent_env, sshd.alias)
    through = _sd(agent_env, "probe", "-F", cfg, sshd.alias, "--json")
    assert through.returncode == 0, through.stderr
    a, b = json.loads(direct.stdout), json.loads(through.stdout)
    assert b["connected"] and set(a) == set(b)
    assert (a["hostname"], a["kernel"], a["cpus"], len(a["gpus"])) == (
        b["hostname"],
        b["kernel"],
        b["cpus"],
        len(b["gpus"]),
    )
    assert status["pid"] != os.getpid()

    sshd.kill_sessions()  # the kept connection drops: the next probe still answers
    again = _sd(agent_env, "probe", "-F", cfg, sshd.alias, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["connected"], again.stderr

    stopped = _sd(agent_env, "agent", "stop", "--json")
    assert json.loads(stopped.stdout)["running"]
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and json.loads(_sd(agent_env, "agent", "status", "--json").stdout)["running"]
    ):
        time.sleep(0.2)
    assert not json.loads(_sd(agent_env, "agent", "status", "--json").stdout)["running"]


def test_an_unknown_host_fails_the_same_through_the_agent(sshd, agent_env):
    cfg = str(sshd.config_path)
    assert _sd(agent_env, "probe", "-F", cfg, sshd.alias, "--json").returncode == 0
    _wait_kept(agent_env, sshd.alias)
    argv = ("probe", "-F", cfg, "nosuchhost.invalid", "--json", "--connect-timeout", "5")
    bad = _sd(agent_env, *argv)
    direct = _sd(agent_env, *argv, "--no-agent")
    assert bad.returncode == direct.returncode == 1 and "nosuchhost.invalid" in bad.stderr
    assert (bad.stdout, bad.stderr) == (direct.stdout, direct.stderr)
