"""A key asked before the app that answers it has mounted waits for the app (a pane's first
`wait_connected` starts the connection while the app still mounts: on a loaded machine the key was
asked first and refused unseen); once the app has gone, or never came, the key is refused."""

from __future__ import annotations

import asyncio

from specdebug.transport.ssh.hostkeys import HostKeyInfo, KeyDecision
from specdebug.transport.ssh.options import HostKeyPrompt

INFO = HostKeyInfo("gpubox", "127.0.0.1", 2222, "ssh-ed25519", "SHA256:x", False, None)  # type: ignore[arg-type]


async def test_a_key_asked_before_the_app_mounts_waits_for_its_answer() -> None:
    prompt = HostKeyPrompt()
    asked = asyncio.ensure_future(prompt(INFO))
    await asyncio.sleep(0.05)
    assert not asked.done()  # the old prompt refused here, with nobody to ask

    async def screen(info: HostKeyInfo) -> KeyDecision:
        return KeyDecision.SAVE

    prompt.ask = screen  # the app mounts
    assert await asyncio.wait_for(asked, 10) is KeyDecision.SAVE


async def test_a_key_asked_after_the_app_has_gone_is_refused_at_once() -> None:
    prompt = HostKeyPrompt()
    prompt.ask = None  # the app went (on_unmount) before the key was asked
    assert await asyncio.wait_for(prompt(INFO), 10) is KeyDecision.REFUSE


async def test_a_key_nobody_comes_to_answer_is_refused_after_the_bound(monkeypatch) -> None:
    monkeypatch.setattr(HostKeyPrompt, "ARRIVE_S", 0.05)
    assert await asyncio.wait_for(HostKeyPrompt()(INFO), 10) is KeyDecision.REFUSE
