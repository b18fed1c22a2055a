"""§5: a catastrophic-backtracking user pattern (profile [patterns], grep -e) is cut off after its
time bound and named, instead of hanging scan, grep or the box-side agent. Built-in packs stay on re."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.matches import follow_matches
from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.userrx import UserPattern
from tests.security.cli_run import run_cli

EVIL = r"slow (?P<value>\d+) (a|aa)+$"  # exponential on "slow 1 aaaa...ab" with a backtracking engine
EVIL_LINE = "slow 1 " + "a" * 80 + "b"
DECODE = (
    "[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, "
    "accept len: 2.50, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0"
)
PROFILE = f"""name = "evil"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--port", "30001"]
[patterns]
slowpoke = '{EVIL}'
verify_ms = 'Target verify (?P<value>[0-9.]+) ms'
"""


def test_user_pattern_is_cut_off_and_named() -> None:
    p = UserPattern("slowpoke", EVIL, timeout=0.2)
    found: list[object] = []
    search = threading.Thread(target=lambda: found.append(p.search(EVIL_LINE)), daemon=True)
    search.start()
    search.join(120)  # a deadline: without the bound, backtracking on this line never ends
    assert found == [None], "the search was not cut off"
    assert p.cut and "0.2 s" in p.cut
    assert p.search("slow 1 aa") is None  # cut off: no longer tried
    assert UserPattern("ok", r"slow (?P<value>\d+)").search("slow 7 x").group("value") == "7"


def test_scan_with_a_backtracking_profile_pattern_ends_and_names_it(sshd, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join([DECODE, EVIL_LINE, "Target verify 3.5 ms", DECODE, EVIL_LINE]) + "\n")
    prof = tmp_path / "evil.toml"
    prof.write_text(PROFILE)
    res = run_cli(
        "scan", "-F", str(sshd.config_path), f"{sshd.alias}:{log}", "-c", str(prof), "--json", timeout=120
    )
    assert res.rc == 2, res.err  # the stats come out, the pattern is named as a profile problem
    d = json.loads(res.out)
    assert "slowpoke" in d["cut_patterns"] and "slowpoke" in res.err and "cut off" in res.err
    assert d["metrics"]["accept_len"]["n"] == 2 and d["metrics"]["verify_ms"]["n"] == 1


async def test_follow_with_a_backtracking_pattern_cuts_it_on_the_box(remote, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join([EVIL_LINE, "Target verify 3.5 ms", EVIL_LINE, "Target verify 4.5 ms"]) + "\n")
    parser = LogParser(
        "sglang", patterns={"slowpoke": EVIL, "verify_ms": r"Target verify (?P<value>[0-9.]+) ms"}
    )

    async def run() -> list:
        return [x async for x in follow_matches(remote, str(log), parser, from_start=True, once=True)]

    items = await asyncio.wait_for(run(), 90)
    cut = [i.detail for i in items if isinstance(i, LogEvent) and i.kind == "pattern_cut"]
    assert cut and "slowpoke" in cut[0]
    verify = [i.metrics["verify_ms"] for i in items if isinstance(i, LogMatch) and "verify_ms" in i.metrics]
    assert verify == [3.5, 4.5]


def test_grep_verb_with_a_backtracking_pattern_ends(sshd, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join(["keep me", EVIL_LINE, "keep me too"]) + "\n")
    res = run_cli(
        "grep",
        "-F",
        str(sshd.config_path),
        f"{sshd.alias}:{log}",
        "-e",
        "(a|aa)+$",
        "-e",
        "keep",
        timeout=120,
    )
    assert res.out.splitlines() == ["keep me", "keep me too"], res.err
    assert "pattern_cut" in res.err and "(a|aa)+$" in res.err
