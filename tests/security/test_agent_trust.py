"""The local agent answers only as the direct path would (issue 43, 40): real sshds, real CLI runs.

Each test has its own agent folder (tests/agentkit.py).  What each shows:
- re-pointing an alias in the ssh config reaches the new host, never the old kept connection;
- a host whose key changed is refused in the direct path's words, not answered from the kept link;
- an agent of other code is replaced (a new pid serves), the verb saying so in one line;
- a verb sees the caller's SLURM_CONF: an agent started without it does not answer for it;
- nothing a verb was asked shows on the agent's command line (ps);
- `agent status` names what blocks the agent (a folder open to others, another user's folder).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import specdebug
from tests.agentkit import agent_env, agent_pids, folder, process_gone, sd, status, wait_for, wait_kept
from tests.sshd_harness import SSHD, _children, start_sshd

pytestmark = [pytest.mark.slow, pytest.mark.skipif(SSHD is None, reason="OpenSSH sshd not installed")]


def _gpu_names(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [g["name"] for g in json.loads(result.stdout)["gpus"]]


def test_a_re_pointed_alias_reaches_the_new_host_not_the_kept_connection(sshd, tmp_path):
    rows = tmp_path / "other-gpus.csv"
    rows.write_text(
        "0, OTHER BOX GPU, GPU-00000000-0000-0000-0000-000000000000, 1, 1, 80000, 30, 50.0, 1000, 1980, "
        "0x0000000000000000\n"
    )
    other = start_sshd(tmp_path / "other", address_env={"127.0.0.1": {"SPECDEBUG_FAKE_GPUS": str(rows)}})
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts.read_text() + other.known_hosts.read_text())
        cfg = tmp_path / "ssh_config"
        with agent_env() as env:
            sshd.write_client_config(cfg, known, alias="box")
            first = _gpu_names(sd(env, "probe", "-F", str(cfg), "box", "--json"))
            assert "OTHER BOX GPU" not in first
            wait_kept(env, "box")
            assert "OTHER BOX GPU" not in _gpu_names(sd(env, "probe", "-F", str(cfg), "box", "--json"))

            other.write_client_config(cfg, known, alias="box")  # the alias now names the other box
            direct = _gpu_names(sd(env, "probe", "-F", str(cfg), "box", "--json", "--no-agent"))
            through = _gpu_names(sd(env, "probe", "-F", str(cfg), "box", "--json"))
            assert direct == through == ["OTHER BOX GPU"]
            logins = [h.get("login") for h in status(env)["hosts"] if h["host"] == "box"]
            assert logins and all(str(login).endswith(f"@127.0.0.1:{other.port}") for login in logins)
    finally:
        other.stop()


def test_a_changed_host_key_is_refused_not_answered_from_the_kept_connection(tmp_path):
    first = start_sshd(tmp_path / "first")
    second = None
    sessions: list[int] = []
    try:
        with agent_env() as env:
            cfg = str(first.config_path)
            assert sd(env, "probe", "-F", cfg, first.alias, "--json").returncode == 0
            wait_kept(env, first.alias)
            # the box's sshd comes back on the same port with another host key; the kept session's
            # own sshd process lives on (only the listener ends), as on a box whose sshd restarted
            sessions = _children(first.proc.pid)
            assert sessions, "the agent keeps no session open"
            first.proc.terminate()
            first.proc.wait(10)
            (tmp_path / "second").mkdir()
            for name in ("client", "client.pub"):
                shutil.copy(tmp_path / "first" / name, tmp_path / "second" / name)
            second = start_sshd(tmp_path / "second", port=first.port)
            assert any(not process_gone(pid) for pid in sessions), "the kept session did not outlive sshd"

            direct = sd(env, "probe", "-F", cfg, first.alias, "--json", "--no-agent")
            through = sd(env, "probe", "-F", cfg, first.alias, "--json")
            assert direct.returncode == through.returncode == 1, through.stdout
            assert "HOST KEY CHANGED" in through.stderr
            assert (through.stdout, through.stderr) == (direct.stdout, direct.stderr)
    finally:
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        first.stop()
        if second is not None:
            second.stop()


def test_an_agent_of_other_code_is_replaced(sshd, tmp_path):
    """The code under the agent is edited: it is replaced.  The edit is made in a copy of the package
    of this test's own (the CLI and its agent import that copy): touching the checkout every test
    runs from made the agents of the tests beside this one replace themselves too (a stray note)."""
    cfg = str(sshd.config_path)
    site = tmp_path / "site"
    shutil.copytree(
        Path(specdebug.__file__).parent, site / "specdebug", ignore=shutil.ignore_patterns("__pycache__")
    )
    module = site / "specdebug" / "agent" / "__init__.py"
    before = os.stat(module)

    def sd(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specdebug.cli", *argv],
            env={**env, "PYTHONPATH": str(site)},
            cwd=tmp_path,  # `-m` puts the cwd first on the path: not the checkout
            capture_output=True,
            text=True,
            timeout=60,
        )

    def status(env: dict[str, str]) -> dict[str, object]:
        return json.loads(sd(env, "agent", "status", "--json").stdout)

    with agent_env() as env:
        env = {**env, "PYTHONPATH": str(site)}  # the agent the CLI starts imports the copy too
        assert sd(env, "probe", "-F", cfg, sshd.alias, "--json").returncode == 0
        old = wait_kept(env, sshd.alias)["pid"]
        # the package is edited (an upgrade changes the files the same way): same version, other code
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        got = sd(env, "probe", "-F", cfg, sshd.alias, "--json")
        assert got.returncode == 0 and json.loads(got.stdout)["connected"], got.stderr
        notes = [line for line in got.stderr.splitlines() if line.startswith("specdebug:")]
        assert len(notes) == 1 and "replaced the agent" in notes[0] and "code changed" in notes[0]
        wait_for("the old agent ends", lambda: process_gone(old), timeout=20)
        new = wait_kept(env, sshd.alias)["pid"]
        assert new != old
        again = sd(env, "probe", "-F", cfg, sshd.alias, "--json")
        assert again.returncode == 0 and "specdebug:" not in again.stderr, again.stderr
        assert status(env)["pid"] == new


def test_a_verb_sees_the_callers_slurm_conf(sshd, tmp_path):
    """An agent started without SLURM_CONF must not answer `probe slurm:JOB` for a caller that has one
    (issue 43: scontrol then said "Could not establish a configuration source")."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("")  # scontrol fails at once, in words that name this file's problem
    cfg = str(sshd.config_path)
    with agent_env() as env:
        assert sd(env, "probe", "-F", cfg, sshd.alias, "--json").returncode == 0
        wait_kept(env, sshd.alias)
        caller = dict(env, SLURM_CONF=str(conf))
        direct = sd(caller, "probe", "slurm:1", "--json", "--no-agent")
        through = sd(caller, "probe", "slurm:1", "--json")
        assert "Could not establish a configuration source" not in through.stdout + through.stderr
        assert (through.returncode, through.stdout) == (direct.returncode, direct.stdout)


def test_nothing_a_verb_was_asked_shows_on_the_agents_command_line(sshd, tmp_path):
    marker = "asked-7f3a9c"
    cfg = sshd.write_client_config(tmp_path / f"cfg-{marker}", sshd.known_hosts, alias=f"box-{marker}")
    with agent_env() as env:
        assert sd(env, "probe", "-F", str(cfg), f"box-{marker}", "--json").returncode == 0
        wait_kept(env, f"box-{marker}")
        pids = agent_pids(env)
        assert pids
        for pid in pids + [c for p in pids for c in _children(p)]:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert marker.encode() not in cmdline and b"probe" not in cmdline, cmdline


def test_agent_status_names_what_blocks_the_agent(sshd):
    cfg = str(sshd.config_path)
    with agent_env() as env:
        assert sd(env, "probe", "-F", cfg, sshd.alias, "--json", "--no-agent").returncode == 0
        where = folder(env)
        where.mkdir(mode=0o700)
        os.chmod(where, 0o755)  # others can enter: no agent may run
        assert sd(env, "probe", "-F", cfg, sshd.alias, "--json").returncode == 0
        found = status(env)
        assert not found["running"] and found["state"] == "blocked"
        assert str(where) in found["why"] and "open to others" in found["why"]
        assert not list(where.glob("*.sock"))
        text = sd(env, "agent", "status").stdout
        assert "no agent can run" in text and "0755" in text
        if os.geteuid() == 0:  # another user's folder (root can make one)
            os.chmod(where, 0o700)
            os.chown(where, 65534, 65534)
            found = status(env)
            assert found["state"] == "blocked" and "belongs to" in found["why"] and "65534" in found["why"]
            os.chown(where, 0, 0)


def test_the_host_is_asked_for_its_key_at_most_every_two_seconds(tmp_path):
    """Each ask is a connection without a login, which OpenSSH >= 9.8 penalises (PerSourcePenalties
    noauth, refused past 15 s of penalty): a busy agent asking on every use would lock its user out."""
    ask_every_s = 2.0  # specdebug.agent.pool.KEY_ASK_EVERY_S
    box = start_sshd(tmp_path / "box")
    log = tmp_path / "box" / "sshd.log"
    try:
        with agent_env() as env:
            cfg = str(box.config_path)
            assert sd(env, "probe", "-F", cfg, box.alias, "--json").returncode == 0
            wait_kept(env, box.alias)
            before = log.read_text().count("[preauth]")
            started = time.monotonic()
            for _ in range(8):
                got = sd(env, "probe", "-F", cfg, box.alias, "--json")
                assert got.returncode == 0 and "specdebug:" not in got.stderr, got.stderr
            elapsed = time.monotonic() - started
            asked = log.read_text().count("[preauth]") - before
            assert 1 <= asked <= elapsed / ask_every_s + 1, (asked, elapsed)
    finally:
        box.stop()


def test_a_box_with_several_host_keys_keeps_its_kept_connection(tmp_path):
    """A box has several host keys (ed25519, ecdsa, rsa): the agent asks for the kind it verified, so
    another kind offered first is not taken for a changed key (which would reconnect on every ask)."""
    ask_every_s = 2.0  # specdebug.agent.pool.KEY_ASK_EVERY_S
    (tmp_path / "box").mkdir()
    extra = []
    for kind in ("ecdsa", "rsa"):
        key = tmp_path / "box" / f"hostkey_{kind}"
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(key)], check=True)
        extra.append(f"HostKey {key}")
    box = start_sshd(tmp_path / "box", extra_config=tuple(extra))
    log = tmp_path / "box" / "sshd.log"
    try:
        with agent_env() as env:
            cfg = str(box.config_path)
            assert sd(env, "probe", "-F", cfg, box.alias, "--json").returncode == 0
            wait_kept(env, box.alias)
            logins, asks = log.read_text().count("Accepted publickey"), log.read_text().count("[preauth]")
            for _ in range(2):
                time.sleep(ask_every_s + 0.1)  # past the ask interval: this probe asks the host again
                got = sd(env, "probe", "-F", cfg, box.alias, "--json")
                assert got.returncode == 0 and "specdebug:" not in got.stderr, got.stderr
            text = log.read_text()
            assert text.count("[preauth]") > asks, "the host was never asked for its key"
            assert text.count("Accepted publickey") == logins, "the kept connection was dropped"
    finally:
        box.stop()


def test_a_key_known_hosts_no_longer_trusts_is_not_answered_from_the_kept_connection(tmp_path):
    """The user's known_hosts now names another key for the host (it was re-keyed, they were told):
    the direct path refuses it as changed, so the agent must not answer from its kept link."""
    box = start_sshd(tmp_path / "box")
    try:
        with agent_env() as env:
            cfg = str(box.config_path)
            for _ in range(2):
                assert sd(env, "probe", "-F", cfg, box.alias, "--json").returncode == 0
            wait_kept(env, box.alias)
            other = tmp_path / "other"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
            kind, key = other.with_suffix(".pub").read_text().split()[:2]
            box.known_hosts.write_text(f"[127.0.0.1]:{box.port} {kind} {key}\n")
            through = sd(env, "probe", "-F", cfg, box.alias, "--json")
            direct = sd(env, "probe", "-F", cfg, box.alias, "--json", "--no-agent")
            assert direct.returncode == through.returncode == 1 and "HOST KEY CHANGED" in through.stderr
            assert (through.stdout, through.stderr) == (direct.stdout, direct.stderr)
    finally:
        box.stop()


def test_the_host_is_asked_beside_the_requests_and_a_changed_key_drops_the_kept_connection(tmp_path):
    """The ask is off the answer's path while the user works (issue 43: every warm probe waited for a
    new key exchange, 0.53 s against 0.07 s for a ControlMaster): after a request the agent keeps
    asking in the background, at most every 2 s, so the next request has a recent answer; a key that
    changes meanwhile drops the kept connection by itself, and the next request is refused as direct."""
    first = start_sshd(tmp_path / "first")
    second = None
    sessions: list[int] = []
    log = tmp_path / "first" / "sshd.log"
    try:
        with agent_env() as env:
            cfg = str(first.config_path)
            assert sd(env, "probe", "-F", cfg, first.alias, "--json").returncode == 0  # starts the agent
            served = wait_kept(env, first.alias).get("served", 0)
            assert sd(env, "probe", "-F", cfg, first.alias, "--json").returncode == 0  # served: asks the host
            assert status(env)["served"] == served + 1
            asked = log.read_text().count("[preauth]")
            # no request now: the host is asked again all the same (twice: not one late ask)
            wait_for(
                "the agent asks the host in the background",
                lambda: log.read_text().count("[preauth]") >= asked + 2,
            )
            sessions = _children(first.proc.pid)
            first.proc.terminate()
            first.proc.wait(10)
            (tmp_path / "second").mkdir()
            for name in ("client", "client.pub"):
                shutil.copy(tmp_path / "first" / name, tmp_path / "second" / name)
            second = start_sshd(tmp_path / "second", port=first.port)
            wait_for(
                "the kept connection is dropped by the background ask",
                lambda: not [h for h in status(env).get("hosts", []) if h["state"] == "connected"],
            )
            through = sd(env, "probe", "-F", cfg, first.alias, "--json")
            direct = sd(env, "probe", "-F", cfg, first.alias, "--json", "--no-agent")
            assert direct.returncode == through.returncode == 1 and "HOST KEY CHANGED" in through.stderr
            assert (through.stdout, through.stderr) == (direct.stdout, direct.stderr)
    finally:
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        first.stop()
        if second is not None:
            second.stop()
