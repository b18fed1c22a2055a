"""Follow logic with this machine as the box (LocalTransport): the real on-box agent runs as a local
subprocess, so offsets, prefilter, truncation, rotation and resume are tested without sshd.

`LocalRemote` is also used by the Logs pane tests."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import Follower, RawLine
from specdebug.core.logs.matches import follow_matches
from specdebug.core.logs.parser import LogParser
from specdebug.remote.client import BoxClient
from tests.boxes import local_box


def LocalRemote() -> BoxClient:
    """This machine as the box (LocalTransport), without a resident helper: the follow agent's
    streams are the only processes.  `drop_connection()` kills them as a lost link would, and the
    client reconnects; `transport.hold()`/`release()` keep it down meanwhile."""
    return local_box(use_helper=False)


async def collect(it, want: int, *, timeout: float = 10.0, kinds: bool = False) -> list:
    """Take items from an async iterator until `want` RawLines/LogMatches arrived."""
    got: list = []

    async def run():
        n = 0
        async for item in it:
            got.append(item)
            if not isinstance(item, LogEvent):
                n += 1
                if n >= want:
                    return

    await asyncio.wait_for(run(), timeout)
    return got


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


async def wait_until(cond, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


class Pump:
    """Runs a follower in the background, collecting its items (lines or matches, and events)."""

    def __init__(self, it) -> None:
        self.items: list = []
        self.task = asyncio.ensure_future(self._run(it))

    async def _run(self, it) -> None:
        async for item in it:
            self.items.append(item)

    def lines(self) -> list:
        return [i for i in self.items if not isinstance(i, LogEvent)]

    def events(self) -> list[str]:
        return [i.kind for i in self.items if isinstance(i, LogEvent)]

    async def until(self, cond, timeout: float = 60.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not cond(self):
            if self.task.done():
                self.task.result()
                raise AssertionError(f"follower ended early: {self.events()}")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timeout; events={self.events()} lines={len(self.lines())}")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


async def test_from_start_offsets_exact(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("one\ntwo\nthree\n")
    f = Follower(LocalRemote(), str(log), offset=0)
    it = f.lines()
    items = await collect(it, 3)
    await it.aclose()
    lines = [i for i in items if isinstance(i, RawLine)]
    assert [(x.offset, x.data) for x in lines] == [(0, b"one"), (4, b"two"), (8, b"three")]
    assert items[0].kind == "opened"
    assert f.offset == 14


async def test_from_end_and_append(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("old\npartial")
    remote = LocalRemote()
    pump = Pump(Follower(remote, str(log)).lines())
    await wait_until(lambda: "opened" in pump.events())
    append(log, " done\nnew\n")
    await wait_until(lambda: len(pump.lines()) == 2)
    await pump.stop()
    # starts at the last complete line boundary, so the line being written arrives whole
    assert [(x.offset, x.data) for x in pump.lines()] == [(4, b"partial done"), (17, b"new")]


async def test_prefilter_on_box_and_exact_offsets(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    body = "".join(f"noise {i}\nDecode batch, accept len: {i}.00\n" for i in range(50))
    log.write_text(body)
    f = Follower(LocalRemote(), str(log), prefilter=[r"accept len: (?P<value>[0-9.]+)"], offset=0)
    it = f.lines()
    items = await collect(it, 50)
    await it.aclose()
    lines = [i for i in items if isinstance(i, RawLine)]
    raw = log.read_bytes()
    for x in lines:
        assert raw[x.offset : x.offset + len(x.data)] == x.data
        assert x.data.startswith(b"Decode batch")
    assert len(lines) == 50


async def test_prefilter_chunk_search_never_skips_a_line(tmp_path: Path) -> None:
    """The agent searches whole chunks; a match running across a newline must not hide the next line."""
    log = tmp_path / "a.log"
    lines = [
        "Target verify",
        "Target verify 3 ms",
        "x",
        "Target verify took 4.5 ms",
        "",
        "keep",
        "Target verify",
    ]
    log.write_text("\n".join(lines) + "\n")
    pats = [r"Target verify[^0-9]*(?P<value>[0-9.]+) ?ms", r"^keep$"]
    f = Follower(LocalRemote(), str(log), prefilter=pats, offset=0)
    it = f.lines()
    items = await collect(it, 3)
    await it.aclose()
    got = [i.data.decode() for i in items if isinstance(i, RawLine)]
    # line 0's match crosses into line 1: checked again on its own line, it is not selected
    assert got == ["Target verify 3 ms", "Target verify took 4.5 ms", "keep"]
    parser = LogParser("sglang", patterns={"verify_ms": pats[0]}, grep=[])
    assert [parser.parse(g) is not None for g in got] == [True, True, False]


async def test_resume_after_drop_sees_every_line_once(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("")
    remote = LocalRemote()
    pump = Pump(Follower(remote, str(log), offset=0, prefilter=["^keep"]).lines())
    await wait_until(lambda: "opened" in pump.events())
    for i in range(100):
        append(log, f"keep {i}\nskip {i}\n")
        if i == 40:
            await wait_until(lambda: len(pump.lines()) >= 30)
            remote.drop_connection()
        if i == 60:
            await wait_until(lambda: len(pump.lines()) >= 50 and pump.events().count("opened") == 2)
            remote.drop_connection()
    await wait_until(lambda: len(pump.lines()) >= 100)
    await asyncio.sleep(0.2)
    await pump.stop()
    got = [x.data.decode() for x in pump.lines()]
    assert got == [f"keep {i}" for i in range(100)]
    assert pump.events().count("reconnecting") == 2 and pump.events().count("resumed") == 2


async def test_truncation_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("a1\na2\na3\n")
    pump = Pump(Follower(LocalRemote(), str(log), offset=0).lines())
    await wait_until(lambda: len(pump.lines()) == 3)
    with open(log, "w") as f:
        f.write("b1\n")
    await wait_until(lambda: "truncated" in pump.events())
    append(log, "b2\n")
    await wait_until(lambda: len(pump.lines()) == 5)
    await pump.stop()
    assert [x.data for x in pump.lines()][3:] == [b"b1", b"b2"]
    assert [x.offset for x in pump.lines()][3:] == [0, 3]


async def test_rotation_drains_old_then_reads_new(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("a1\n")
    pump = Pump(Follower(LocalRemote(), str(log), offset=0).lines())
    await wait_until(lambda: len(pump.lines()) == 1)
    with open(log, "a") as old:
        os.rename(log, tmp_path / "a.log.1")
        log.write_text("n1\n")
        old.write("a2\n")  # written to the old file after the rename
        old.flush()
    await wait_until(lambda: "rotated" in pump.events())
    append(log, "n2\n")
    await wait_until(lambda: len(pump.lines()) == 4)
    await pump.stop()
    assert sorted(x.data for x in pump.lines()) == [b"a1", b"a2", b"n1", b"n2"]
    assert [x.data for x in pump.lines()][-2:] == [b"n1", b"n2"]


async def test_rotation_while_disconnected_is_detected_by_inode(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("a1\n")
    remote = LocalRemote()
    pump = Pump(Follower(remote, str(log), offset=0).lines())
    await wait_until(lambda: len(pump.lines()) == 1)
    remote.transport.hold()
    await wait_until(lambda: "reconnecting" in pump.events())
    os.rename(log, tmp_path / "a.log.1")
    log.write_text("n1\nn2\n")
    remote.transport.release()
    await wait_until(lambda: len(pump.lines()) == 3)
    await pump.stop()
    assert "rotated" in pump.events()
    assert [x.data for x in pump.lines()] == [b"a1", b"n1", b"n2"]


async def test_missing_file_waits_and_reads_from_start(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    pump = Pump(Follower(LocalRemote(), str(log)).lines())
    await wait_until(lambda: "missing" in pump.events())
    log.write_text("first\n")
    await wait_until(lambda: len(pump.lines()) == 1)
    await pump.stop()
    assert pump.lines()[0].offset == 0


async def test_no_python_falls_back_to_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import specdebug.core.logs.follow as follow

    real = follow.agent_argv
    monkeypatch.setattr(follow, "agent_argv", lambda *a, **k: ["no-such-python3-here", *real(*a, **k)[1:]])
    log = tmp_path / "a.log"
    log.write_text("x1\nx2\n")
    f = Follower(LocalRemote(), str(log), offset=0)
    it = f.lines()
    items = await collect(it, 2)
    await it.aclose()
    assert "fallback" in [i.kind for i in items if isinstance(i, LogEvent)]
    assert [(i.offset, i.data) for i in items if isinstance(i, RawLine)] == [(0, b"x1"), (3, b"x2")]


async def test_follow_matches_parses_with_pack(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text(
        "[2026-01-15 12:00:00] server_args=ServerArgs(model_path='m')\n"
        "[2026-01-15 12:00:01 TP0] Load weight begin. avail mem=78.00 GB\n"
        "[2026-01-15 12:00:02 TP0] some chatter\n"
        "[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, "
        "accept len: 2.50, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n"
        "[2026-01-15 12:00:04] The server is fired up and ready to roll!\n"
    )
    parser = LogParser("sglang", patterns={"verify_ms": r"Target verify[^0-9]*(?P<value>[0-9.]+) ?ms"})
    it = follow_matches(LocalRemote(), str(log), parser, from_start=True)
    items = await collect(it, 4)
    matches = [i for i in items if isinstance(i, LogMatch)]
    assert [m.event for m in matches] == ["startup", "startup", "decode_batch", "ready"]
    assert matches[2].metrics["accept_len"] == 2.5 and matches[2].warmup is True
    append(log, "[2026-01-15 12:00:05 TP0] Target verify took 3.25 ms\n")
    more = await collect(it, 1)
    m = [i for i in more if isinstance(i, LogMatch)][0]
    await it.aclose()
    assert m.event == "verify_ms" and m.metrics == {"verify_ms": 3.25} and m.warmup is False


async def test_agent_killed_on_box_is_restarted_from_offset(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("l0\n")
    remote = LocalRemote()
    pump = Pump(Follower(remote, str(log), offset=0).lines())
    await wait_until(lambda: len(pump.lines()) == 1)
    for p in remote.transport.running():
        p.kill()  # killed on the box, connection still up
    await wait_until(lambda: pump.events().count("opened") == 2)
    append(log, "l1\n")
    await wait_until(lambda: len(pump.lines()) == 2)
    await pump.stop()
    assert [x.data for x in pump.lines()] == [b"l0", b"l1"]
    assert "reconnecting" in pump.events()
