"""core.target: one way to open what the user named, for a one-box profile and a deployment alike."""

import asyncio
from contextlib import asynccontextmanager

import pytest

from specdebug.core.deployment import DeploymentError
from specdebug.core.profiles import load_profile_text
from specdebug.core.target import open_target, target_of

ONE = """
name = "one"
[server]
kind = "vllm"
argv = ["vllm", "serve", "m", "--port", "8000"]
port = 8000
"""

TWO = (
    ONE.replace('name = "one"', 'name = "two"')
    + """
[deployment]
nodes = ["n0", "n1"]
leader_address = "127.0.0.2"
dist_init_port = 29500
"""
)


class FakeRemote:
    def __init__(self, host: str) -> None:
        self.name = host
        self.closed = False


def connector(opened: list[FakeRemote], refuse: set[str] = frozenset()):  # type: ignore[assignment]
    @asynccontextmanager
    async def connect(host: str):
        if host in refuse:
            raise ConnectionError(host)
        r = FakeRemote(host)
        opened.append(r)
        try:
            yield r
        finally:
            r.closed = True

    return connect


def test_one_box_profile_is_a_one_node_target_on_host() -> None:
    opened: list[FakeRemote] = []

    async def go() -> None:
        async with open_target(load_profile_text(ONE), "box", connector(opened)) as t:
            assert [n.host for n in t.nodes] == ["box"] and not t.multi
            assert t.leader.profile.name == "one" and t.leader_remote is opened[0]

    asyncio.run(go())
    assert opened[0].closed


def test_deployment_opens_every_node_and_partial_leaves_one_out() -> None:
    opened: list[FakeRemote] = []

    async def go() -> None:
        prof = load_profile_text(TWO)
        async with open_target(prof, None, connector(opened)) as t:
            assert t.multi and [n.host for n in t.nodes] == ["n0", "n1"]
            assert t.node("n1") is not None and t.node("n1").profile.name == "two.node1"  # type: ignore[union-attr]
        with pytest.raises(ConnectionError):
            async with open_target(prof, None, connector(opened, {"n1"})):
                pass
        async with open_target(prof, None, connector(opened, {"n1"}), partial=(ConnectionError,)) as t:
            assert t.unreachable == ("n1",) and [n.host for n in t.reachable()] == ["n0"]
        with pytest.raises(DeploymentError):  # a HOST that is not the leader
            async with open_target(prof, "n1", connector(opened)):
                pass

    asyncio.run(go())
    assert all(r.closed for r in opened)


def test_target_of_held_connections() -> None:
    from specdebug.core.deployment import place

    dep = place(load_profile_text(TWO))
    t = target_of(dep, {"n0": FakeRemote("n0")})  # type: ignore[dict-item]
    assert t.unreachable == ("n1",) and t.leader_remote.name == "n0"
