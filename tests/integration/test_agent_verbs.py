"""Every read-only connected verb through the warm agent says what the direct path says (issue 43).

`status`, `env`, `grep` (without --follow) and `metrics` (without --watch) were run by the agent
for `probe` only: each paid the whole import and a new SSH connection.  Now the agent runs them on its
kept connection.  Against a simulated server launched over the loopback sshd, each verb is run with
--no-agent and through the agent: stdout, stderr and the exit code must be the same bytes (metrics:
the same keys, its rates differ between two reads), and the agent must really have run it (its
`served` count grows).  A request that needs the caller's process (a local file, --follow) runs
directly, without a note.  Real sshd, real sim, the test's own agent folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agentkit import agent_env, sd, status, wait_kept
from tests.sshd_harness import free_port

pytestmark = pytest.mark.slow


def _profile(tmp_path: Path) -> Path:
    log = tmp_path / "sim.log"
    argv = [sys.executable, "-m", "specdebug.sim", "--tp", "2", "--port", str(free_port())]
    argv += ["--time-scale", "0.02", "--log-file", str(tmp_path / "sim.sim.log"), "--enable-metrics"]
    path = tmp_path / "p.toml"
    path.write_text(
        f'name = "agentverbs"\nready = {{ timeout_s = 60 }}\n[server]\nkind = "sglang"\n'
        f"argv = {json.dumps(argv)}\nlog_file = {json.dumps(str(log))}\n"
        '[server.env]\nAGENT_VERBS_MARK = "1"\n'
    )
    return path


def _served(env: dict[str, str]) -> int:
    return int(status(env).get("served", 0))


def _settled(stdout: str) -> str:
    """The output less what is a live reading of a process, not an answer: its scheduler state (R, S,
    D) flips between two reads on a busy machine (a busy run, 2026-12-06: `env --json` differed in
    one worker's `state`).  Text output, and JSON without it, stay as they are."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not (k == "state" and "pid" in value)}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    try:
        return json.dumps(strip(json.loads(stdout)), sort_keys=True)
    except ValueError:
        return stdout


def _same(env: dict[str, str], *argv: str) -> None:
    """The verb with --no-agent and through the agent: the same answer (the same bytes but for a
    process's live scheduler state), and the agent ran the second."""
    direct = sd(env, *argv, "--no-agent")
    before = _served(env)
    through = sd(env, *argv)
    assert _served(env) == before + 1, f"the agent did not run {argv[0]}: {through.stderr}"
    assert (through.returncode, _settled(through.stdout), through.stderr) == (
        direct.returncode,
        _settled(direct.stdout),
        direct.stderr,
    ), argv


def test_status_env_grep_metrics_through_the_agent_say_what_the_direct_path_says(sshd, tmp_path):
    cfg, box = str(sshd.config_path), sshd.alias
    profile = str(_profile(tmp_path))
    with agent_env() as env:
        launched = sd(env, "launch", "-F", cfg, box, "-c", profile, "--wait", timeout=120)
        assert launched.returncode == 0, launched.stdout + launched.stderr
        try:
            assert sd(env, "probe", "-F", cfg, box, "--json").returncode == 0  # starts the agent
            wait_kept(env, box)
            _same(env, "status", "-F", cfg, box, "-c", profile, "--json")
            _same(env, "status", "-F", cfg, box, "-c", profile)
            _same(env, "env", "-F", cfg, box, "-c", profile, "--expect", "AGENT_VERBS_MARK=1", "--json")
            _same(env, "env", "-F", cfg, box, "-c", profile, "--expect", "AGENT_VERBS_MARK=2")
            log = str(tmp_path / "sim.log")
            _same(env, "grep", "-F", cfg, f"{box}:{log}", "-e", r"Load weight", "--json")
            _same(env, "grep", "-F", cfg, f"{box}:{log}", "-e", r"no such line 7f3a")
            _same(env, "status", "-F", cfg, box, "-c", str(tmp_path / "missing.toml"))

            direct = sd(env, "metrics", "-F", cfg, box, "-c", profile, "--json", "--no-agent")
            before = _served(env)
            through = sd(env, "metrics", "-F", cfg, box, "-c", profile, "--json")
            assert _served(env) == before + 1 and through.returncode == direct.returncode == 0, through.stderr
            assert set(json.loads(through.stdout)) == set(json.loads(direct.stdout))

            # the caller's own file, and what streams until stopped, run in the caller's process
            before = _served(env)
            local = sd(env, "grep", log, "-e", "Load weight")
            assert local.returncode == 0 and "specdebug:" not in local.stderr, local.stderr
            assert _served(env) == before
        finally:
            stopped = sd(env, "stop", "-F", cfg, box, "-c", profile, "--grace", "2", timeout=120)
            assert stopped.returncode == 0, stopped.stderr


def test_a_relative_profile_and_an_example_name_reach_the_agent_as_the_caller_means_them(sshd, tmp_path):
    """The agent runs in its own folder: `-c p.toml` is the caller's file, `-c NAME` an example."""
    cfg, box = str(sshd.config_path), sshd.alias
    _profile(tmp_path)
    with agent_env() as env:
        assert sd(env, "probe", "-F", cfg, box, "--json").returncode == 0
        wait_kept(env, box)
        for name in ("p.toml", "baseline"):
            argv = ("status", "-F", cfg, box, "-c", name, "--json")
            direct = _run_in(tmp_path, env, *argv, "--no-agent")
            before = _served(env)
            through = _run_in(tmp_path, env, *argv)
            assert _served(env) == before + 1, through.stderr
            assert (through.returncode, through.stdout, through.stderr) == (
                direct.returncode,
                direct.stdout,
                direct.stderr,
            ), name


def _run_in(folder: Path, env: dict[str, str], *argv: str):
    from tests import clifork

    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(folder),
    )
