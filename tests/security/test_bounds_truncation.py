"""§5: a log truncated and written again past our offset (a restarted server reusing its log file)
is detected by checking the bytes before the offset, not only size < offset: the first lines of
the new content are never lost and no torn line is reported. Live, across a reconnect, and on resume."""

from __future__ import annotations

import asyncio
from pathlib import Path

from specdebug.core.logs.follow import Follower
from tests.unit.test_log_follow_local import Pump

OLD = "".join(f"old line {i:03d}\n" for i in range(40))
NEW = "".join(f"NEW {i:03d} after the restart, a longer line than before\n" for i in range(60))


def rewrite(path: Path, text: str) -> None:
    """Truncate and write again, back to back (what `> log` then a fast writer does)."""
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(text.encode())


def after_truncation(pump: Pump) -> list[str]:
    kinds = [getattr(i, "kind", None) for i in pump.items]
    start = kinds.index("truncated")
    return [i.data.decode() for i in pump.items[start:] if getattr(i, "data", None) is not None]


async def test_truncate_and_regrow_while_following(remote, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(OLD)
    pump = Pump(Follower(remote, str(log), offset=0).lines())
    await pump.until(lambda p: len(p.lines()) == 40, timeout=60)
    await asyncio.sleep(0.3)
    rewrite(log, NEW)
    await pump.until(lambda p: "truncated" in p.events() and len(after_truncation(p)) >= 60, timeout=60)
    await pump.stop()
    assert after_truncation(pump) == NEW.splitlines()


async def test_truncate_and_regrow_during_a_reconnect(remote, sshd, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(OLD)
    pump = Pump(Follower(remote, str(log), offset=0).lines())
    await pump.until(lambda p: len(p.lines()) == 40, timeout=60)
    await asyncio.sleep(0.3)
    assert sshd.kill_sessions() >= 1
    rewrite(log, NEW)  # while the connection is down: grown past the old offset before we look again
    await pump.until(lambda p: "resumed" in p.events(), timeout=60)
    await pump.until(lambda p: "truncated" in p.events() and len(after_truncation(p)) >= 60, timeout=60)
    await pump.stop()
    assert after_truncation(pump) == NEW.splitlines()
    assert all(not x.data.decode().startswith("after the restart") for x in pump.lines())  # no torn line


async def test_resume_from_saved_offset_checks_the_bytes_before_it(remote, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(OLD)
    first = Follower(remote, str(log), offset=0)
    pump = Pump(first.lines())
    await pump.until(lambda p: len(p.lines()) == 40, timeout=60)
    await pump.until(lambda p: first.check is not None, timeout=30)  # the agent's POS record carries it
    await pump.stop()
    saved = (first.offset, first.inode, first.check)
    assert saved[0] == len(OLD)
    rewrite(log, NEW)
    again = Follower(remote, str(log), offset=saved[0], inode=saved[1], check=saved[2])
    pump = Pump(again.lines())
    await pump.until(lambda p: "truncated" in p.events() and len(after_truncation(p)) >= 60, timeout=60)
    await pump.until(lambda p: again.check is not None, timeout=30)
    await pump.stop()
    assert after_truncation(pump) == NEW.splitlines()
    # an unchanged file resumes exactly where it was, without a false alarm
    saved = (again.offset, again.inode, again.check)
    assert saved[2] is not None
    with open(log, "a") as f:
        f.write("appended\n")
    resumed = Follower(remote, str(log), offset=saved[0], inode=saved[1], check=saved[2], once=True)
    rest = [x async for x in resumed.lines()]
    assert [x.data.decode() for x in rest if getattr(x, "data", None) is not None] == ["appended"]
    assert "truncated" not in [getattr(x, "kind", None) for x in rest]
