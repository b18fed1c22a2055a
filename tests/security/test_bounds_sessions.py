"""§5: with `MaxSessions 1` on the sshd the probe helper holds the only session; a follow used to
wait 99 s in silence for an exec channel. Now it says why within a few seconds and follows anyway
through the probe channel (polling), and grep without --follow reads the file the same way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from specdebug.core.logs.follow import Follower
from tests.boxes import ssh_box
from tests.security.cli_run import run_cli
from tests.sshd_harness import SSHD, Sshd, start_sshd
from tests.unit.test_log_follow_local import Pump


@pytest.fixture(scope="module")
def sshd_one_session(tmp_path_factory) -> Sshd:
    if SSHD is None:
        pytest.skip("OpenSSH sshd not installed: real-SSH tests skipped")
    server = start_sshd(tmp_path_factory.mktemp("sshd-max1"), extra_config=("MaxSessions 1",))
    yield server
    server.stop()


@pytest.fixture
async def remote_one(sshd_one_session: Sshd):
    r = ssh_box(
        sshd_one_session.alias,
        ssh_config=sshd_one_session.config_path,
        keepalive_interval=1.0,
        connect_timeout=5.0,
    )
    await r.start()
    await r.wait_connected(15)
    yield r
    await r.close()


async def test_follow_works_with_max_sessions_1(remote_one, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("old\n")
    pump = Pump(Follower(remote_one, str(log), prefilter=["^keep"]).lines())
    # told within seconds (5 s on an idle machine), not after 99 s: the wait's deadline is below that
    await pump.until(lambda p: "fallback" in p.events(), timeout=60)
    said = next(i for i in pump.items if getattr(i, "kind", None) == "fallback")
    assert "MaxSessions" in said.detail
    await pump.until(lambda p: "opened" in p.events(), timeout=30)
    for i in range(20):
        with open(log, "a") as f:
            f.write(f"keep {i}\ndrop {i}\n")
        await asyncio.sleep(0.05)
    await pump.until(lambda p: len(p.lines()) >= 20, timeout=60)
    with open(log, "a") as f:
        f.write("keep last\n")
    await pump.until(lambda p: len(p.lines()) >= 21, timeout=60)
    await pump.stop()
    got = [x.data.decode() for x in pump.lines()]
    assert got == [f"keep {i}" for i in range(20)] + ["keep last"]  # from the end: "old" is not read
    raw = log.read_bytes()
    assert all(raw[x.offset : x.offset + len(x.data)] == x.data for x in pump.lines())


def test_grep_verb_reads_once_with_max_sessions_1(sshd_one_session: Sshd, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"keep {i}\ndrop {i}\n" for i in range(100)))
    s = sshd_one_session
    res = run_cli("grep", "-F", str(s.config_path), f"{s.alias}:{log}", "-e", "^keep", timeout=90)
    assert res.rc == 0, res.err
    assert res.out.splitlines() == [f"keep {i}" for i in range(100)]
    assert "MaxSessions" in res.err


async def test_opens_cut_by_a_drop_are_a_drop_and_keep_the_session_limit(remote) -> None:
    """asyncssh fails the opens of a dropped link with sshd's MaxSessions code: they must read as a
    drop (what the log follower and every stream retry on), not shrink the learned session limit."""
    from specdebug.transport.base import ConnectionDropped

    transport = remote.transport
    limit = transport._slots.limit  # noqa: SLF001
    opens = [asyncio.ensure_future(transport.exec(["sleep", "30"])) for _ in range(6)]
    await asyncio.sleep(0)  # their channel opens are on their way, sshd has not answered yet
    remote.drop_connection()
    results = await asyncio.gather(*opens, return_exceptions=True)
    # an open must not land silently on the next link (until stop 33 it retried on the dead one as if
    # sshd had said MaxSessions, for up to ~20 s, then opened on the reconnected link)
    for r in results:
        if not isinstance(r, BaseException):
            await r.wait_closed(2.0)
    wrong = [r for r in results if not isinstance(r, ConnectionDropped) and not _on_a_gone_link(r)]
    assert not wrong, [repr(r) for r in results]
    assert transport._slots.limit == limit  # noqa: SLF001
    await remote.wait_connected(30)
    more = await asyncio.gather(*(transport.exec(["true"]) for _ in range(3)))
    for p in more:
        await p.wait_closed(2.0)


def _on_a_gone_link(r: object) -> bool:
    """A process that opened on the link before it dropped (sshd answered within one loop turn)."""
    lost = getattr(r, "_lost", None)
    return callable(lost) and bool(lost())
