"""A host key accepted "once" in the TUI is the session's key for that host (real sshd, Pilot).

The box's sshd is restarted with another host key while the TUI is connected: the reconnect must
be refused as CHANGED with the same message a headless verb prints, never offered as an "unknown"
key with an accept button, and retrying from the hosts pane must not ask either.
"""

from __future__ import annotations

import asyncio
import re
import shutil

import pytest

from specdebug.remote.api import ConnState, HostKeyRefused
from specdebug.remote.factory import ConnectOptions, HostKeyPrompt, SSHOptions, connect_host
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.hosts import HostsPane
from specdebug.tui.screens.hostkey import HostKeyScreen
from tests.boxes import ssh_box
from tests.sshd_harness import SSHD, start_sshd

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SSHD is None, reason="OpenSSH sshd not installed"),
]


def same_words(message: str) -> str:
    return re.sub(r"\S*known_hosts\S*", "KNOWN_HOSTS", message)


async def _wait_for(pilot, predicate, timeout=30.0, never=None):
    """Wait for `predicate`; `never` must stay false all along (checked at every step)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert never is None or not never(), "a forbidden state was reached"
        assert loop.time() < deadline, "condition not reached"
        await pilot.pause(0.05)
    assert never is None or not never(), "a forbidden state was reached"


async def test_key_accepted_once_then_changed_is_refused(tmp_path) -> None:
    first = start_sshd(tmp_path / "first")
    kh = tmp_path / "known_hosts"  # empty: the first key is unknown
    cfg = first.write_client_config(tmp_path / "ssh_config", kh)
    second = None
    prompt = HostKeyPrompt()  # the app answers it: the key screen
    options = ConnectOptions(
        ssh=SSHOptions(ssh_config=cfg, on_host_key=prompt, keepalive_interval=1.0, connect_timeout=5.0)
    )
    remote = connect_host("gpubox", options)
    ctx = AppContext(remotes={"gpubox": remote}, selected="gpubox", host_key_prompt=prompt)
    app = SpecdebugApp(ctx, panes=[HostsPane])
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await _wait_for(pilot, lambda: isinstance(app.screen, HostKeyScreen))
            await pilot.press("o")  # accept once: nothing saved, but this session now knows the key
            await _wait_for(pilot, lambda: remote.status.state is ConnState.CONNECTED)
            assert not kh.exists() or kh.read_text() == ""

            # the box comes back on the same port with another host key (same client key, so only
            # the host key differs)
            first.stop()
            (tmp_path / "second").mkdir()
            for name in ("client", "client.pub"):
                shutil.copy(tmp_path / "first" / name, tmp_path / "second" / name)
            second = start_sshd(tmp_path / "second", port=first.port)
            asking = lambda: isinstance(app.screen, HostKeyScreen)  # noqa: E731
            await _wait_for(pilot, lambda: remote.status.state is ConnState.FAILED, never=asking)
            tui_message = remote.status.last_error or ""
            assert tui_message.startswith("HOST KEY CHANGED for gpubox")

            # retrying from the hosts pane refuses again, without a prompt
            seen: list[ConnState] = []
            remote.subscribe(lambda st: seen.append(st.state))
            app.query_one(HostsPane).focus()
            await pilot.press("r")
            await _wait_for(
                pilot,
                lambda: ConnState.RECONNECTING in seen and remote.status.state is ConnState.FAILED,
                never=asking,
            )
            assert remote.status.last_error == tui_message

        # the same words as a headless verb whose known_hosts holds the first key
        headless_cfg = second.write_client_config(tmp_path / "headless_config", first.known_hosts)
        headless = ssh_box("gpubox", ssh_config=headless_cfg, connect_timeout=5.0)
        try:
            with pytest.raises(HostKeyRefused) as info:
                await headless.wait_connected(15)
        finally:
            await headless.close()
        # the same words; only the known_hosts file named in the fix command differs (the TUI's own)
        assert info.value.changed and same_words(str(info.value)) == same_words(tui_message)
    finally:
        await remote.close()
        first.stop()
        if second is not None:
            second.stop()
