"""Port holder, health and group signals over real SSH: one helper request, or (no helper) one exec
channel, with the same answers.  The box is this machine; the test only looks at the socket, HTTP
server and process group it started itself."""

from __future__ import annotations

import http.server
import signal
import socket
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from specdebug.core.control.records import box_call, find_port_holder, health_on_box
from specdebug.remote.client import BoxClient
from tests.boxes import ssh_box


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=[True, False], ids=["helper", "exec"])
async def box(request: pytest.FixtureRequest, sshd) -> AsyncIterator[BoxClient]:
    r = ssh_box(sshd.alias, ssh_config=sshd.config_path, use_helper=request.param, connect_timeout=5.0)
    await r.start()
    await r.wait_connected(15)
    assert r.has_helper is request.param  # which path is under test
    yield r
    await r.close()


def start_ticks(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return int(raw[raw.rfind(")") + 2 :].split()[19])


async def test_port_holder_and_health(box: BoxClient, http_port: int) -> None:
    holder = await find_port_holder(box, http_port)
    assert holder.listening and holder.pids  # this test's own process (same user as the box login)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = await find_port_holder(box, s.getsockname()[1])
        assert not free.listening and free.describe().endswith("is free")
        assert await health_on_box(box, s.getsockname()[1], "/health") is None  # refused: no answer
    assert await health_on_box(box, http_port, "/health") == 200
    assert await health_on_box(box, http_port, "/nope") == 404


async def test_group_signal_keeps_its_identity_rules(box: BoxClient) -> None:
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        t = start_ticks(p.pid)
        for pgid in (1, 0):
            out = await box_call(box, "signal", {"pgid": pgid, "start_ticks": t, "sig": "TERM"})
            assert out["state"] == "refused" and not out["signalled"]
        out = await box_call(box, "signal", {"pgid": p.pid, "start_ticks": t + 1, "sig": "TERM"})
        assert out["state"] == "mismatch" and not out["signalled"] and p.poll() is None
        ident = {"pgid": p.pid, "start_ticks": t, "pid": p.pid, "pid_start_ticks": t}
        out = await box_call(box, "signal", {**ident, "sig": "TERM"})
        assert out["signalled"] and p.wait(10) == -signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(10)
