"""§5: with `MaxSessions 1` on the sshd the probe helper holds the only session; a follow used to
wait 99 s in silence for an exec channel. Now it says why within a few seconds and follows anyway
through the probe channel (polling), and grep without --follow reads the file the same way."""

from __future__ import annotations

import asyncio
import time
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
    t0 = time.monotonic()
    pump = Pump(Follower(remote_one, str(log), prefilter=["^keep"]).lines())
    await pump.until(lambda p: "fallback" in p.events(), timeout=30)
    said = next(i for i in pump.items if getattr(i, "kind", None) == "fallback")
    assert time.monotonic() - t0 < 20  # told within seconds (5 s on an idle machine), not after 99 s
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
