"""A ProxyCommand that fails says so at once, in its own words (issue 40).

Before: asyncssh ran the command with its stderr unheeded, read its exit as "Connection lost" and
the box client retried it for the whole connect timeout ("not connected after 15.0 s
(reconnecting: Connection lost)"), with a stray asyncio "Unknown child process" line first.  Now
the connect fails on the command's exit, quoting its status and stderr.  A working ProxyCommand
(a relay to the test's sshd) still carries the link, and is gone when the verb ends.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.security.cli_run import run_cli
from tests.sshd_harness import Sshd

CONNECT_TIMEOUT_S = 600  # the old code waited all of it: the run's 90 s limit ends such a wait

_RELAY = """\
import os, selectors, socket, sys
open(sys.argv[3], "w").write(str(os.getpid()))
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj == 0:
            data = os.read(0, 65536)
            if not data:
                sys.exit(0)
            s.sendall(data)
        else:
            data = s.recv(65536)
            if not data:
                sys.exit(0)
            os.write(1, data)
"""


def _config(tmp_path: Path, proxy: str, sshd: Sshd | None = None) -> Path:
    cfg = tmp_path / "ssh_config"
    if sshd is None:
        cfg.write_text(f"Host gpubox\n  HostName 127.0.0.1\n  ProxyCommand {proxy}\n")
        return cfg
    return sshd.write_client_config(cfg, sshd.known_hosts, ProxyCommand=proxy)


def test_a_failing_proxy_command_fails_the_connect_at_once_with_its_stderr(tmp_path: Path) -> None:
    proxy = tmp_path / "proxy.sh"
    proxy.write_text('#!/bin/sh\necho "proxy: no route" >&2\nexit 1\n')
    proxy.chmod(0o755)
    cfg = _config(tmp_path, f"{proxy} %h %p")
    t0 = time.monotonic()
    res = run_cli("probe", "-F", str(cfg), "--connect-timeout", str(CONNECT_TIMEOUT_S), "gpubox", timeout=90)
    took = time.monotonic() - t0
    text = res.err + res.out
    print(f"failing ProxyCommand reported after {took:.2f} s (connect timeout {CONNECT_TIMEOUT_S} s)")
    assert res.rc != 0, text
    assert "proxy: no route" in text and "status 1" in text, text
    assert "Unknown child process" not in text and "Traceback" not in text, text


def test_a_proxy_command_that_cannot_start_is_named(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f"{tmp_path / 'no-such-proxy'} %h %p")
    res = run_cli("probe", "-F", str(cfg), "--connect-timeout", str(CONNECT_TIMEOUT_S), "gpubox", timeout=90)
    text = res.err + res.out
    assert res.rc != 0, text
    assert "ProxyCommand could not start" in text and "no-such-proxy" in text, text


@pytest.mark.usefixtures("box_state_dir")
def test_a_working_proxy_command_carries_the_link_and_ends_with_it(tmp_path: Path, sshd: Sshd) -> None:
    relay, pidfile = tmp_path / "relay.py", tmp_path / "relay.pid"
    relay.write_text(_RELAY)
    cfg = _config(tmp_path, f"{sys.executable} {relay} %h %p {pidfile}", sshd)
    res = run_cli("probe", "-F", str(cfg), "--json", "gpubox", timeout=90)
    assert res.rc == 0, res.err + res.out
    assert '"connected": true' in res.out, res.out
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), f"the ProxyCommand (pid {pid}) outlived the verb"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
