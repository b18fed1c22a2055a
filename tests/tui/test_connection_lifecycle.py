"""The Connection lifecycle as front ends use it: one factory, listeners that can be removed,
a host-key decision fixed at construction (no network: nothing here is started)."""

from __future__ import annotations

import logging

from specdebug.remote.api import Connection, ConnState, Remote
from specdebug.remote.factory import ConnectOptions, HostKeyPrompt, connect_host
from specdebug.transport.ssh.hostkeys import HostKeyInfo, KeyDecision
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.hosts import HostsPane
from tests.tui.fakes import StillRemote


def _info() -> HostKeyInfo:
    return HostKeyInfo(
        host="box",
        hostname="127.0.0.1",
        port=22,
        key_type="ssh-ed25519",
        fingerprint="SHA256:x",
        changed=False,
        key=None,  # type: ignore[arg-type]  # the decision never looks at the key itself
    )


def test_the_factory_makes_a_connection():
    remote = connect_host("nobody@127.0.0.1:9", ConnectOptions(use_helper=False))
    assert isinstance(remote, Connection) and isinstance(remote, Remote)
    assert remote.name == "nobody@127.0.0.1:9" and remote.generation == 0


async def test_listeners_hear_changes_until_unsubscribed():
    remote = connect_host("nobody@127.0.0.1:9")
    seen: list[ConnState] = []
    unsubscribe = remote.subscribe(lambda st: seen.append(st.state))
    await remote.close()
    assert seen == [ConnState.CLOSED]
    unsubscribe()
    unsubscribe()  # twice is harmless
    await remote.close()
    assert seen == [ConnState.CLOSED]


async def test_a_failing_listener_is_logged_and_the_others_still_hear(caplog):
    remote = connect_host("nobody@127.0.0.1:9")
    seen: list[ConnState] = []

    def broken(_st):
        raise RuntimeError("listener bug")

    remote.subscribe(broken)
    remote.subscribe(lambda st: seen.append(st.state))
    with caplog.at_level(logging.DEBUG, logger="specdebug.remote"):
        await remote.close()
    assert seen == [ConnState.CLOSED]
    failed = [r for r in caplog.records if "status listener" in r.getMessage()]
    assert failed and failed[0].exc_info is not None and "listener bug" in str(failed[0].exc_info[1])


async def test_host_key_prompt_refuses_until_someone_answers():
    prompt = HostKeyPrompt()
    assert await prompt(_info()) is KeyDecision.REFUSE

    async def accept_once(_info: HostKeyInfo) -> KeyDecision:
        return KeyDecision.ONCE

    prompt.ask = accept_once
    assert await prompt(_info()) is KeyDecision.ONCE


async def test_app_and_panes_remove_their_listeners_when_they_go():
    remote = StillRemote("box")  # counts its starts and listeners
    prompt = HostKeyPrompt()
    app = SpecdebugApp(
        AppContext(remotes={"box": remote}, selected="box", host_key_prompt=prompt), panes=[HostsPane]
    )
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert len(remote.listeners) == 2  # the status line and the hosts pane
        assert remote.started == 1
        assert prompt.ask == app.ask_host_key  # the key screen answers while the app runs
    assert remote.listeners == []
    assert prompt.ask is None  # afterwards unknown keys are refused again
