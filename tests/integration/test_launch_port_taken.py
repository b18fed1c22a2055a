"""A launch onto a port another process holds is refused before anything starts, and says how to move
the profile and to which port (issue 41: the example profiles have fixed ports, and every user of a
shared box starts from the same examples).  On this machine as the box (`local`), with a socket of
the test's own; the box suggests a port nobody listens on, from the login's $SPECDEBUG_SIM_PORTS
block (the suite gives each worker one, as `specdebug sim install-box` gives each user)."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from specdebug.sim.box.ports import PORTS_VAR
from tests.security.boxkit import unique, write_profile
from tests.security.cli_run import run_cli
from tests.sshd_harness import free_port


def test_taken_port_is_refused_with_how_to_change_it(tmp_path: Path) -> None:
    port = free_port()
    low, high = (int(x) for x in os.environ[PORTS_VAR].split("-"))
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
        m = re.search(
            r"to a free one: (\d+) is free on the box now \(this login's \$SPECDEBUG_SIM_PORTS block\)", r.err
        )
        assert m is not None, r.err
        suggested = int(m.group(1))
        assert low <= suggested < high and suggested != port
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", suggested))  # free indeed (nobody listened on it)
    assert not marker.exists()  # refused before launch
