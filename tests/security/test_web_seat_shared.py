"""The read-only browser seat is the shared session's screen: it reads no path it types, and is capped.

Before, each browser tab got its own read-only app with its own SSH connection, and the Logs pane's
`o` (then the context screen) opened any file on the box as the driver, a 0600 one included.  Now
the seat mirrors the pairing session's own screen (what the driver and the seats see), takes no
input, and serves at most SPECDEBUG_WEB_SEATS_MAX browsers.  A websocket client speaks
textual-serve's protocol to the real seat; the session's app runs against the real sshd.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pair_harness import shared_root, tmux, wait_for

pytestmark = pytest.mark.slow
pytest.importorskip("textual_serve", reason="textual-serve not installed (pip install -e .[dev])")
aiohttp = pytest.importorskip("aiohttp")
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


class Reader:
    """Everything one websocket received, as text without terminal sequences."""

    def __init__(self, ws) -> None:
        self.ws, self.data = ws, b""

    async def until(self, *needles: bytes, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = ANSI.sub(b"", self.data)
            if all(n in text for n in needles):
                return text
            try:
                msg = await asyncio.wait_for(self.ws.receive(), 2)
            except TimeoutError:
                continue
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.data += msg.data
            elif msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                break
        raise AssertionError(f"{needles} not seen: {ANSI.sub(b'', self.data)[-1500:]!r}")

    async def drain(self, seconds: float) -> bytes:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                msg = await asyncio.wait_for(self.ws.receive(), 0.5)
            except TimeoutError:
                continue
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.data += msg.data
        return ANSI.sub(b"", self.data)


async def test_browser_seat_mirrors_the_session_reads_nothing_and_is_capped(sshd, tmp_path: Path) -> None:
    secret = tmp_path / "private.txt"
    secret.write_text("TOPSECRET-" + secrets.token_hex(4) + "\n")
    secret.chmod(0o600)
    with shared_root() as root:
        name = f"w{secrets.token_hex(3)}"
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX", "TMUX_PANE")}
        env |= {"SPECDEBUG_PAIR_DIR": str(root), "SPECDEBUG_WEB_SEATS_MAX": "2"}
        out_path, err_path = tmp_path / "web.out", tmp_path / "web.err"
        proc = subprocess.Popen(
            [sys.executable, "-m", "specdebug.cli", "pair", "--web", "-F", str(sshd.config_path), "gpubox",
             "--name", name],
            stdout=open(out_path, "wb"), stderr=open(err_path, "wb"), env=env, start_new_session=True,
        )  # fmt: skip
        sock = str(root / f"specdebug-pair.{os.getuid()}.{name}" / "tmux.sock")
        try:
            wait_for(lambda: "http://" in out_path.read_text() or proc.poll() is not None, 60, what="the URL")
            m = re.search(r"http://127\.0\.0\.1:(\d+)/([A-Za-z0-9_-]+)/", out_path.read_text())
            assert m, out_path.read_text() + err_path.read_text()
            port, token = m.group(1), m.group(2)
            url = f"ws://127.0.0.1:{port}/{token}/ws?width=200&height=55"
            async with aiohttp.ClientSession() as http:
                ws1 = await http.ws_connect(url)
                first = Reader(ws1)
                await first.until(b"gpubox", b"connected", f"pairing {name}".encode())

                # the same screen the seats see: a key typed in the session shows in the browser
                tmux(sock, "send-keys", "-t", f"={name}:", "?")
                await first.until(b"specdebug keys")
                tmux(sock, "send-keys", "-t", f"={name}:", "Escape")

                # the browser types a path: nothing reaches the session, nothing is read
                for keys in ("3", "o", str(secret), "\r", "c"):
                    await ws1.send_json(["stdin", keys])
                    await asyncio.sleep(0.3)
                seen = await first.drain(4)
                shown = tmux(sock, "capture-pane", "-p", "-t", f"={name}:").stdout
                assert b"TOPSECRET" not in seen and "TOPSECRET" not in shown
                assert str(secret) not in shown  # the session never got the typed path

                # capped: the second browser is served, the third refused
                ws2 = await http.ws_connect(url)
                await Reader(ws2).until(b"gpubox")
                with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
                    await http.ws_connect(url)
                assert exc.value.status == 503
                await ws2.close()
                await ws1.close()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
            tmux(sock, "kill-server")
        assert (
            not Path(sock).exists() or tmux(sock, "has-session").returncode != 0
        )  # the seat ended its session
