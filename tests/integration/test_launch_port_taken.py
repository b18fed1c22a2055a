"""A launch onto a port another process holds is refused before anything starts, and says how to move
the profile (issue 41: the example profiles have fixed ports, and every user of a shared box starts
from the same examples).  On this machine as the box (`local`), with a socket of the test's own."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.security.boxkit import unique, write_profile
from tests.security.cli_run import run_cli
from tests.sshd_harness import free_port


def test_taken_port_is_refused_with_how_to_change_it(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen()
        marker = tmp_path / "started"
        prof = write_profile(
            tmp_path / "p.toml",
            unique("porttaken"),
            {
                "argv": ["sh", "-c", f"touch {marker}; sleep 60", "--port", str(port)],
                "port": port,
                "kind": "custom",
                "log_file": str(tmp_path / "p.log"),
            },
        )
        r = run_cli("launch", "local:", "-c", str(prof), "--session", str(tmp_path / "s"))
    assert r.rc == 1, r.out + r.err
    assert f"port {port} is in use" in r.err, r.err
    assert f"change `--port {port}` in [server] argv and `port = {port}` in {prof}" in r.err, r.err
    assert not marker.exists()  # refused before launch
