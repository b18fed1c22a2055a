"""remote/openssh.py: which addresses the OpenSSH path takes, and the argv it gives ssh."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from specdebug.remote import openssh
from specdebug.remote.openssh import network_failure, ssh_argv


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


@pytest.mark.parametrize(
    ("said", "line"),
    [
        (
            "ssh: Could not resolve hostname nope: Name or service not known\n",
            "ssh: Could not resolve hostname nope: Name or service not known",
        ),
        (
            "ssh: connect to host 10.0.0.1 port 22: Connection timed out",
            "ssh: connect to host 10.0.0.1 port 22: Connection timed out",
        ),
        (
            "Connection timed out during banner exchange\r\nConnection to UNKNOWN port 65535 timed out\n",
            "Connection to UNKNOWN port 65535 timed out",
        ),
        (
            "ssh: connect to host 127.0.0.1 port 1: Connection refused",
            "ssh: connect to host 127.0.0.1 port 1: Connection refused",
        ),
        ("Host key verification failed.", None),  # asyncssh says it in its words
        ("me@box: Permission denied (publickey).", None),
        ("kex_exchange_identification: Connection closed by remote host", None),
        ("", None),
    ],
)
def test_only_a_network_failure_skips_the_asyncssh_path(said: str, line: str | None):
    assert network_failure(said) == line


def test_the_control_socket_fits_under_a_deep_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """OpenSSH binds CONTROL.<16 characters>: under a deep TMPDIR the folder moves to /tmp."""
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    folder = openssh._socket_folder()
    assert folder is not None
    try:
        assert folder.startswith("/tmp/sdssh-") and list(deep.iterdir()) == []
        assert len(f"{folder}/c") + openssh.OPENSSH_BIND_SUFFIX <= openssh.SUN_PATH_MAX
    finally:
        Path(folder).rmdir()
