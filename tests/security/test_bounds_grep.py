"""§5: a pattern that can match the empty string never stalls the box-side filter (it used to loop
forever at the end of each block, spinning the agent), once or following, over the real sshd."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specdebug.core.logs.events import LogEvent
from specdebug.core.logs.follow import Follower, RawLine
from tests.security.cli_run import run_cli
from tests.unit.test_log_follow_local import Pump

EMPTY_MATCHING = [".*", "^", "$", "x*", "(?:)", r"\b|^$"]
LINES = ["one", "two", "", "three four"]


@pytest.mark.parametrize("pattern", EMPTY_MATCHING)
async def test_empty_matching_pattern_reads_once_and_ends(remote, tmp_path: Path, pattern: str) -> None:
    log = tmp_path / "a.log"
    log.write_text("\n".join(LINES) + "\n")
    follower = Follower(remote, str(log), prefilter=[pattern], offset=0, once=True)

    async def run() -> list:
        return [item async for item in follower.lines()]

    items = await asyncio.wait_for(run(), 60)
    lines = [i.data.decode() for i in items if isinstance(i, RawLine)]
    assert lines == LINES  # every line matches an empty-matching pattern
    assert [i.kind for i in items if isinstance(i, LogEvent)][-1] == "ended"


async def test_empty_matching_pattern_while_following(remote, tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("")
    pump = Pump(Follower(remote, str(log), prefilter=[".*"], offset=0).lines())
    await pump.until(lambda p: "opened" in p.events(), timeout=60)
    for i in range(50):
        with open(log, "a") as f:
            f.write(f"line {i}\n")
    await pump.until(lambda p: len(p.lines()) >= 50, timeout=60)
    await pump.stop()
    assert [x.data.decode() for x in pump.lines()] == [f"line {i}" for i in range(50)]


def test_grep_verb_dot_star_ends(sshd, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"l{i}\n" for i in range(1000)))
    res = run_cli(
        "grep", "-F", str(sshd.config_path), f"{sshd.alias}:{log}", "-e", ".*", "--json", timeout=90
    )
    assert res.rc == 0, res.err
    got = [json.loads(x)["line"] for x in res.out.splitlines()]
    assert got == [f"l{i}" for i in range(1000)]
