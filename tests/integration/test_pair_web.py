"""`specdebug pair --web`: a read-only browser seat on 127.0.0.1 behind a token, against the real sshd.

Refused without the token (page, static files and websocket alike), serves the app with it (the
websocket streams the TUI's screen: the hosts pane with the connected host), listens on loopback
only, prints the token once.  With Debian's chromium installed, a real headless browser loads the
page and the seat streams the app to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("textual_serve", reason="textual-serve not installed (pip install -e .[dev])")
aiohttp = pytest.importorskip("aiohttp")
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


class WebSeat:
    def __init__(self, sshd, tmp_path: Path) -> None:
        self.err_path = tmp_path / "web.err"
        self.out_path = tmp_path / "web.out"
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX", "TMUX_PANE")}
        self.root = Path(tempfile.mkdtemp(prefix="sdweb-", dir="/tmp"))  # the pairing session's folder
        env["SPECDEBUG_PAIR_DIR"] = str(self.root)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specdebug.cli", "pair", "--web", "-F", str(sshd.config_path), "gpubox"],
            stdout=open(self.out_path, "wb"),
            stderr=open(self.err_path, "wb"),
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while "http://" not in self.out_path.read_text():
            assert self.proc.poll() is None, self.err_path.read_text()
            assert time.monotonic() < deadline, "no URL printed"
            time.sleep(0.1)
        m = re.search(r"http://127\.0\.0\.1:(\d+)/([A-Za-z0-9_-]+)/", self.out_path.read_text())
        assert m, self.out_path.read_text()
        self.port, self.token = int(m.group(1)), m.group(2)
        self.url = m.group(0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        sock = self.root / f"specdebug-pair.{os.getuid()}.pair" / "tmux.sock"
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)  # if the seat could not
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def seat(sshd, tmp_path):
    s = WebSeat(sshd, tmp_path)
    yield s
    s.stop()


def listening_sockets(port: int) -> list[tuple[str, str]]:
    """(table, local address) of every LISTEN socket on `port`, from /proc/net/tcp and tcp6."""
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            local, _remote, state = line.split()[1:4]
            addr, hexport = local.rsplit(":", 1)
            if int(hexport, 16) == port and state == "0A":
                found.append((table, addr))
    return found


async def test_web_seat_token_loopback_and_app(seat) -> None:
    base = f"http://127.0.0.1:{seat.port}"
    # loopback only, IPv4 only
    assert listening_sockets(seat.port) == [("tcp", "0100007F")]
    # the token is printed once
    assert seat.out_path.read_text().count(seat.token) == 1
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/ws", "/static/js/textual.js", "/wrong-token/", f"/{seat.token[:-1]}/", "/../"):
            async with http.get(base + path) as resp:
                assert resp.status == 403, path
        with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
            await http.ws_connect(f"ws://127.0.0.1:{seat.port}/ws?width=120&height=40")
        assert exc.value.status == 403
        async with http.get(seat.url) as resp:
            assert resp.status == 200
            page = await resp.text()
        assert f"ws://127.0.0.1:{seat.port}/{seat.token}/ws" in page
        async with http.get(f"{base}/{seat.token}/static/js/textual.js") as resp:
            assert resp.status == 200
        # the websocket with the token streams the read-only app: the hosts pane, connected
        ws = await http.ws_connect(f"ws://127.0.0.1:{seat.port}/{seat.token}/ws?width=140&height=40")
        screen = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                msg = await asyncio.wait_for(ws.receive(), 5)
            except TimeoutError:
                continue
            if msg.type == aiohttp.WSMsgType.BINARY:
                screen += msg.data
            elif msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                break
            text = ANSI.sub(b"", screen)
            if (
                b"Hosts" in text
                and b"gpubox" in text
                and b"connected" in text
                and b"read-only browser seat" in text
            ):
                break
        text = ANSI.sub(b"", screen)
        assert b"Hosts" in text and b"connected" in text and b"read-only browser seat" in text, text[-2000:]
        await ws.close()
    assert "browser 1 connected" in seat.err_path.read_text()


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="chromium not installed (apt-get install chromium): browser check skipped",
)
async def test_headless_chromium_shows_the_hosts_pane(sshd, tmp_path: Path) -> None:
    """A real browser loads the tokened page; its JavaScript opens the websocket; the seat streams
    the read-only app's hosts pane to it (read from what the server sent to that browser)."""
    from specdebug.tui import webseat

    sent: list[bytes] = []
    app_argv = [sys.executable, "-m", "specdebug.cli", "-F", str(sshd.config_path), "--readonly", "gpubox"]
    runner, url, server = await webseat.start_web_seat(app_argv, on_output=sent.append)
    browser = await asyncio.create_subprocess_exec(
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--remote-debugging-port=0",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--window-size=1400,900",
        url,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        text = b""
        while time.monotonic() < deadline:
            text = ANSI.sub(b"", b"".join(sent))
            if b"Hosts" in text and b"connected" in text and b"READ-ONLY" in text:
                break
            await asyncio.sleep(0.5)
        assert server.sessions >= 1, "the browser never opened the websocket"
        assert b"Hosts" in text and b"connected" in text and b"READ-ONLY" in text, text[-2000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(browser.pid, signal.SIGKILL)
        await browser.wait()
        await runner.cleanup()
