"""box/ports.py finds listeners through the kernel's sock_diag netlink, not /proc/net/tcp.

Why: reading /proc/net/tcp (and tcp6, even when empty) walks every socket of the machine, ~4 ms a
table on a box with a few hundred connections, and `port_holder` read both twice: 80 % of a warm
`specdebug status` (issue 43).  The netlink dump walks only the listening sockets.  Where it does not
answer (no netlink: not Linux, a sandbox), the tables are read as before and say the same."""

from __future__ import annotations

import os
import socket

import pytest

from specdebug.box import ports


def _listening() -> socket.socket:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


def test_port_holder_does_not_read_the_socket_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    if ports._diag_listeners(socket.AF_INET) is None:
        pytest.skip("no sock_diag netlink here")

    def no_tables(tables: tuple[str, ...]) -> object:
        raise AssertionError(f"read {tables}")

    monkeypatch.setattr(ports, "_tcp_rows", no_tables)
    with _listening() as held:
        port = held.getsockname()[1]
        got = ports.op_port_holder({"port": port})
    assert got["listening"] and os.getpid() in got["pids"]
    assert got["owners"][0]["uid"] == os.getuid()
    assert got["free"] is not None and got["free"] != port


def test_the_tables_say_the_same_where_netlink_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    with _listening() as held:
        port = held.getsockname()[1]
        by_kernel = ports.op_port_holder({"port": port})
        monkeypatch.setattr(ports, "_diag_listeners", lambda family: None)
        by_tables = ports.op_port_holder({"port": port})
    assert by_tables == by_kernel
    assert by_tables["listening"] and os.getpid() in by_tables["pids"]


def test_netlink_and_tables_list_the_same_listener() -> None:
    if ports._diag_listeners(socket.AF_INET) is None:
        pytest.skip("no sock_diag netlink here")
    with _listening() as held:
        port = held.getsockname()[1]
        kernel = [row for row in ports.listeners() if row[0] == port]
        tables = [row for row in ports.listeners(("/proc/net/tcp",)) if row[0] == port]
    assert kernel == tables and len(kernel) == 1 and kernel[0][1] == os.getuid()
