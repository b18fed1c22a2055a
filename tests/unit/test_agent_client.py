"""The agent's client side, without an agent: which verbs go to it and what it is sent (pure)."""

from __future__ import annotations

import os

from specdebug.agent.client import absolute_paths, disabled
from specdebug.agent.paths import env_fingerprint, is_private, runtime_dir


def test_path_options_are_made_absolute_for_the_agent_and_nothing_else(tmp_path):
    (tmp_path / "cfg").write_text("")
    (tmp_path / "p.toml").write_text("")
    argv = ["-F", "cfg", "box", "--json", "--profile=p.toml", "-c", "/abs.toml", "--session", "s"]
    assert absolute_paths(argv, str(tmp_path)) == [
        "-F",
        f"{tmp_path}/cfg",
        "box",
        "--json",
        f"--profile={tmp_path}/p.toml",
        "-c",
        "/abs.toml",
        "--session",
        "s",
    ]


def test_a_name_that_is_no_file_here_reaches_the_agent_as_typed(tmp_path):
    """`-c baseline` names an example profile (no such file here): made absolute it named a missing
    file in the caller's folder, and a missing file would fail naming another path than typed."""
    assert absolute_paths(["-c", "baseline", "--profile=nope.toml", "-F", "gone"], str(tmp_path)) == [
        "-c",
        "baseline",
        "--profile=nope.toml",
        "-F",
        "gone",
    ]


def test_no_agent_flag_help_and_env_take_the_direct_path(monkeypatch):
    monkeypatch.delenv("SPECDEBUG_NO_AGENT", raising=False)
    assert not disabled(["box", "--json"])
    assert disabled(["box", "--no-agent"]) and disabled(["--help"])
    monkeypatch.setenv("SPECDEBUG_NO_AGENT", "1")
    assert disabled(["box"])


def test_the_environment_that_changes_a_verb_picks_another_agent():
    base = {"HOME": "/home/a", "PATH": "/bin"}
    assert env_fingerprint(base) == env_fingerprint(dict(base, SPECDEBUG_NO_AGENT="1"))
    assert env_fingerprint(base) != env_fingerprint(dict(base, HOME="/home/b"))
    assert env_fingerprint(base) != env_fingerprint(dict(base, SPECDEBUG_STATE_DIR="/x"))


def test_a_folder_others_can_enter_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "run"
    shared.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    folder = runtime_dir()
    assert folder is not None and is_private(folder)
    os.chmod(folder, 0o755)
    assert runtime_dir() is None
    os.chmod(folder, 0o700)
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert not is_private(link)


def test_a_socket_path_too_long_for_the_kernel_means_no_agent(tmp_path):
    from specdebug.agent.paths import socket_path

    assert socket_path(tmp_path / ("d" * 120)) is None
    assert socket_path(tmp_path.__class__("/tmp")) is not None


def test_the_settings_a_verb_reads_from_the_caller_pick_another_agent():
    """Slurm's and kubectl's settings and the login name change what a verb does (issue 43: an agent
    started without SLURM_CONF answered `probe slurm:JOB` for a caller that had one)."""
    from specdebug.agent.paths import caller_env, env_differences

    base = {"HOME": "/home/a", "PATH": "/bin"}
    for key, value in (
        ("SLURM_CONF", "/etc/slurm/other.conf"),
        ("KUBECONFIG", "/k"),
        ("USER", "b"),
        ("SQUEUE_FORMAT", "%i"),
    ):
        assert env_fingerprint(base) != env_fingerprint(dict(base, **{key: value})), key
    assert env_differences(caller_env(base), caller_env(dict(base, SLURM_CONF="/x"))) == ["SLURM_CONF"]


def test_the_login_key_is_what_the_alias_resolves_to(tmp_path):
    """Two names for one login share a key; re-pointing a name changes its key (as ssh -G sees it)."""
    import argparse

    from specdebug.agent.pool import connection_key

    cfg = tmp_path / "ssh_config"
    body = "Host a b\n  HostName 10.0.0.1\n  User u\n  Port 2222\n  IdentityFile /k/id\n"
    cfg.write_text(body)
    args = argparse.Namespace(ssh_config=str(cfg))
    assert connection_key("a", args) == connection_key("b", args)
    assert connection_key("a", args)[1:5] == ("u", "10.0.0.1", 2222, ("/k/id",))
    assert connection_key("u@10.0.0.1:2222", args)[1:4] == ("u", "10.0.0.1", 2222)
    cfg.write_text(body.replace("Port 2222", "Port 2223"))
    assert connection_key("a", args)[3] == 2223
    cfg.write_text(body.replace("/k/id", "/k/other"))
    assert connection_key("a", args)[4] == ("/k/other",)
    assert connection_key("slurm:12", args)[:2] == ("slurm", "slurm:12")


def test_an_agent_of_other_code_or_interpreter_says_which():
    from specdebug.agent.paths import code_identity
    from specdebug.agent.server import _identity_difference

    mine = code_identity()
    assert _identity_difference(mine, dict(mine, version="0.0.9")).endswith("the caller 0.0.9")
    assert "under /other/python" in _identity_difference(mine, dict(mine, python="/other/python 3.12.1"))
    assert (
        _identity_difference(mine, dict(mine, package="/other/checkout"))
        == "its code changed since it started"
    )
    assert code_identity() == mine  # stable while nothing changes


def test_the_interpreter_is_one_whatever_name_started_it():
    """The console script runs `.venv/bin/python3`, `python -m specdebug` runs `.venv/bin/python`: one
    interpreter, one agent (they replaced each other's agent on every call when a user alternated)."""
    import subprocess
    import sys

    import pytest

    here = os.path.dirname(sys.executable)
    names = [n for n in ("python", "python3") if os.path.exists(os.path.join(here, n))]
    if len(names) < 2:
        pytest.skip("one name for the interpreter here")
    code = "from specdebug.agent.paths import caller_identity; print(caller_identity()['python'])"
    seen = {
        subprocess.run(
            [os.path.join(here, n), "-c", code], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        for n in names
    }
    assert len(seen) == 1, seen
