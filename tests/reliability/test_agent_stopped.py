"""A stopped local agent (`kill -STOP`) costs a verb a bounded wait, then the direct path and one line.

Its socket still accepts connections (the kernel queues them), so a verb that waited for an answer
without a deadline hung forever (issue 43).  Now the agent must accept within SPECDEBUG_AGENT_WAIT_S;
the verb then connects itself, after one stderr line naming the agent's pid and that it is stopped,
and `agent status` says the same.  Real sshd, the test's own agent folder.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.agentkit import agent_env, process_gone, sd, status, wait_for, wait_kept

pytestmark = pytest.mark.slow

WAIT_S = 2  # the test's handshake bound (a SPECDEBUG_* setting: its agent is started with it)


def test_a_stopped_agent_is_waited_for_a_bounded_time_then_the_verb_runs_directly(sshd):
    cfg = str(sshd.config_path)
    with agent_env(SPECDEBUG_AGENT_WAIT_S=str(WAIT_S)) as env:
        assert sd(env, "probe", "-F", cfg, sshd.alias, "--json").returncode == 0
        pid = wait_kept(env, sshd.alias)["pid"]
        os.kill(pid, signal.SIGSTOP)  # agent_env kills it at the end, whatever happened
        for _ in range(2):  # every later verb too, not only the first
            got = sd(env, "probe", "-F", cfg, sshd.alias, "--json", timeout=60)
            assert got.returncode == 0, got.stderr
            assert json.loads(got.stdout)["connected"]
            notes = [line for line in got.stderr.splitlines() if line.startswith("specdebug:")]
            assert len(notes) == 1, got.stderr
            assert f"within {WAIT_S} s" in notes[0] and f"agent pid {pid}" in notes[0]
            assert "stopped" in notes[0] and "running directly" in notes[0]

        # agent status tells the truth: that agent, its pid, stopped
        found = status(env)
        assert not found["running"] and found["state"] == "not-answering" and found["pid"] == pid
        assert "stopped by a signal" in found["why"]

        # and `agent stop` ends it although it cannot answer
        stopped = json.loads(sd(env, "agent", "stop", "--json").stdout)
        assert stopped["stopped"] and stopped["pid"] == pid
        wait_for("the stopped agent ends", lambda: process_gone(pid), timeout=15)
