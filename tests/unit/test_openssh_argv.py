"""remote/openssh.py: which addresses the OpenSSH path takes, and the argv it gives ssh."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.remote.openssh import ssh_argv


@pytest.mark.parametrize(
    ("text", "argv"),
    [
        ("box", ["box"]),
        ("ssh://box", ["box"]),
        ("me@box", ["-l", "me", "box"]),
        ("me@box:2222", ["-p", "2222", "-l", "me", "box"]),
        ("[::1]:22", ["-p", "22", "::1"]),
    ],
)
def test_an_ssh_address_becomes_ssh_words(text: str, argv: list[str]) -> None:
    assert ssh_argv(text, None) == argv


@pytest.mark.parametrize(
    "text", ["slurm:12", "local:", "k8s:pod", "-oProxyCommand=x", "me@-x", "a b", "box:0"]
)
def test_what_it_does_not_take_is_left_to_asyncssh(text: str) -> None:
    assert ssh_argv(text, None) is None


def test_a_config_file_is_passed_and_a_missing_one_left_to_asyncssh(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.write_text("")
    assert ssh_argv("box", str(cfg)) == ["-F", str(cfg), "box"]
    assert ssh_argv("box", str(tmp_path / "missing")) is None
