"""The agent's client side, without an agent: which verbs go to it and what it is sent (pure)."""

from __future__ import annotations

import os

from specdebug.agent.client import absolute_paths, disabled
from specdebug.agent.paths import env_fingerprint, is_private, runtime_dir


def test_path_options_are_made_absolute_for_the_agent_and_nothing_else():
    argv = ["-F", "cfg", "box", "--json", "--profile=p.toml", "-c", "/abs.toml", "--session", "s"]
    assert absolute_paths(argv, "/home/u/proj") == [
        "-F",
        "/home/u/proj/cfg",
        "box",
        "--json",
        "--profile=/home/u/proj/p.toml",
        "-c",
        "/abs.toml",
        "--session",
        "s",
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
