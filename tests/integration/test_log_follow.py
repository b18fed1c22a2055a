"""Follow a file over the loopback OpenSSH: every appended line arrives once, also across a killed
server-side connection, and truncation is reported. Plus the scan/grep verbs on HOST:PATH."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specdebug.core.logs.context import read_context
from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import Follower
from specdebug.core.logs.matches import follow_matches
from specdebug.core.logs.parser import LogParser
from tests.unit.test_log_follow_local import Pump


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


async def test_appended_lines_arrive_once(remote, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("before\n")
    pump = Pump(Follower(remote, str(log), prefilter=[r"^keep \d+"]).lines())
    await pump.until(lambda p: "opened" in p.events())
    for i in range(300):
        append(log, f"keep {i}\ndrop {i}\n")
    await pump.until(lambda p: len(p.lines()) >= 300)
    await asyncio.sleep(0.3)
    await pump.stop()
    got = [x.data.decode() for x in pump.lines()]
    assert got == [f"keep {i}" for i in range(300)]
    raw = log.read_bytes()
    assert all(raw[x.offset : x.offset + len(x.data)] == x.data for x in pump.lines())


async def test_server_side_killed_mid_follow_every_line_once(remote, sshd, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    pump = Pump(Follower(remote, str(log), offset=0).lines())
    await pump.until(lambda p: "opened" in p.events())
    stop = asyncio.Event()

    async def writer() -> None:
        i = 0
        while not stop.is_set():
            append(log, "".join(f"line {i + k}\n" for k in range(10)))
            i += 10
            await asyncio.sleep(0.01)
        writer.total = i  # type: ignore[attr-defined]

    w = asyncio.ensure_future(writer())
    await pump.until(lambda p: len(p.lines()) >= 200)
    assert sshd.kill_sessions() >= 1  # the server side of our connection dies mid-stream
    await pump.until(lambda p: "resumed" in p.events())
    await pump.until(lambda p: p.events().count("opened") >= 2)
    await asyncio.sleep(0.3)
    stop.set()
    await w
    total = writer.total  # type: ignore[attr-defined]
    await pump.until(lambda p: len(p.lines()) >= total)
    await asyncio.sleep(0.3)
    await pump.stop()
    got = [x.data.decode() for x in pump.lines()]
    assert got == [f"line {i}" for i in range(total)]  # none lost, none repeated
    assert "reconnecting" in pump.events()


async def test_truncation_over_ssh(remote, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\na2\na3\n")
    pump = Pump(Follower(remote, str(log), offset=0).lines())
    await pump.until(lambda p: len(p.lines()) == 3)
    log.write_text("b1\n")
    await pump.until(lambda p: "truncated" in p.events())
    append(log, "b2\n")
    await pump.until(lambda p: len(p.lines()) == 5)
    await pump.stop()
    assert [x.data for x in pump.lines()] == [b"a1", b"a2", b"a3", b"b1", b"b2"]
    ev = [i for i in pump.items if isinstance(i, LogEvent) and i.kind == "truncated"][0]
    assert "shrank" in ev.detail


async def test_follow_matches_and_context_over_ssh(remote, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    body = [f"[2026-01-15 12:00:{i:02d} TP0] chatter {i}" for i in range(30)]
    body[25] = (
        "[2026-01-15 12:00:25 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, accept len: 2.50, "
        "accept rate: 0.50, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0"
    )
    log.write_text("\n".join(body) + "\n")
    parser = LogParser("sglang", from_start=True)
    pump = Pump(follow_matches(remote, str(log), parser, from_start=True))
    await pump.until(lambda p: len(p.lines()) == 1)
    await pump.stop()
    m: LogMatch = pump.lines()[0]
    assert m.metrics["accept_len"] == 2.5
    ctx = await read_context(remote, str(log), m.offset, before=20, after=20)
    assert [c.text for c in ctx if c.target] == [body[25]]
    assert ctx[0].text == body[5] and ctx[-1].text == body[29]


def test_grep_and_scan_verbs_over_ssh(sshd, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from specdebug.cli import main

    log = tmp_path / "server.log"
    log.write_text(
        "[2026-01-15 12:00:01 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, accept len: 2.00, "
        "accept rate: 0.50, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n"
        "[2026-01-15 12:00:02 TP0] other\n"
        "[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, accept len: 3.00, "
        "accept rate: 0.50, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n"
    )
    target = f"{sshd.alias}:{log}"
    cfg = str(sshd.config_path)
    assert main(["grep", "-F", cfg, target, "-e", r"accept len: (?P<al>[0-9.]+)", "--json"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [o["fields"]["al"] for o in out] == [2.0, 3.0] and out[1]["offset"] > out[0]["offset"]
    assert main(["scan", "-F", cfg, target, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["lines"] == 3 and d["metrics"]["accept_len"]["mean"] == 2.5
    assert main(["scan", "-F", cfg, f"{sshd.alias}:{tmp_path}/missing.log", "--json"]) == 1


def test_grep_follow_verb_streams_json(sshd, tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    log = tmp_path / "server.log"
    log.write_text("old accept len: 9.00\n")
    cmd = [
        sys.executable,
        "-m",
        "specdebug.cli",
        "grep",
        "-F",
        str(sshd.config_path),
        f"{sshd.alias}:{log}",
        "-e",
        r"accept len: (?P<al>[0-9.]+)",
        "--follow",
        "--json",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        appended = 0
        got = []
        import select

        while len(got) < 2 and time.monotonic() < deadline:
            if appended < 100:  # keep appending until the follower (started from the end) sees them
                append(log, f"x\naccept len: {appended}.50\n")
                appended += 1
            r, _, _ = select.select([proc.stdout], [], [], 0.5)
            if r:
                got.append(json.loads(proc.stdout.readline()))
        assert len(got) == 2, proc.stderr.read() if proc.poll() is not None else "no output"
        assert all(g["fields"]["al"] != 9.0 for g in got)  # --follow starts at the end
        assert got[1]["fields"]["al"] == got[0]["fields"]["al"] + 1
    finally:
        proc.kill()
        proc.wait()


def test_grep_verb_missing_file_over_ssh(sshd, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from specdebug.cli import main

    assert main(["grep", "-F", str(sshd.config_path), f"{sshd.alias}:{tmp_path}/nope.log", "-e", "x"]) == 1
    assert "no such file" in capsys.readouterr().err
