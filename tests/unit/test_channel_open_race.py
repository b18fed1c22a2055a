"""A link that closes between the box accepting an exec and asyncssh starting the channel's session
(asyncssh's channel.create calls `session_started()` on a session the close already cleared: an
AttributeError) is a drop, as every other close while opening is.  A busy run met it: the startup
log follower died of it, and a server that came up healthy timed out unseen ("ready line not seen")."""

from __future__ import annotations

import pytest

from specdebug.remote.api import ConnectionDropped
from specdebug.transport.ssh.options import SSHOptions
from specdebug.transport.ssh.transport import SSHTransport


class RaceConn:
    """An asyncssh connection whose exec meets the close mid-open."""

    def __init__(self, closed: bool) -> None:
        self.closed = closed

    async def create_process(self, command: str, encoding: None = None) -> None:
        raise AttributeError("'NoneType' object has no attribute 'session_started'")

    def is_closed(self) -> bool:
        return self.closed


def transport(tmp_path) -> SSHTransport:
    config = tmp_path / "ssh_config"
    config.write_text("")
    return SSHTransport("127.0.0.1", SSHOptions(ssh_config=config))


async def test_a_channel_whose_link_closed_while_opening_is_a_drop(tmp_path) -> None:
    t = transport(tmp_path)
    t._conn = RaceConn(closed=True)  # type: ignore[assignment]  # noqa: SLF001
    with pytest.raises(ConnectionDropped, match="connection lost opening a channel"):
        await t.exec(["true"])
    assert not t.sessions_full()


async def test_the_same_error_on_a_live_link_is_not_hidden(tmp_path) -> None:
    t = transport(tmp_path)
    t._conn = RaceConn(closed=False)  # type: ignore[assignment]  # noqa: SLF001
    with pytest.raises(AttributeError):
        await t.exec(["true"])
