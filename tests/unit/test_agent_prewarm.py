"""The agent warms the first verb's connection only once that verb's process has ended (issue 43).

Its imports and SSH handshake took the CPU from the very verb the user waited for: a first call that
started an agent took 1.47 s where the same call without one took 1.08 s (load 12, two cores)."""

from __future__ import annotations

import argparse
import asyncio
import io
import subprocess
import sys

from specdebug.agent import lifecycle


class _Kept:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def get(self, host: str, args: argparse.Namespace) -> tuple[object, None]:
        self.asked.append(host)
        return object(), None


class _Agent:
    def __init__(self) -> None:
        self.kept = _Kept()


async def test_the_connection_waits_for_the_caller_to_end() -> None:
    caller = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        agent = _Agent()
        warming = asyncio.ensure_future(
            lifecycle.prewarm(agent, ["probe", "box", "--json"], caller.pid)  # type: ignore[arg-type]
        )
        for _ in range(10):  # the caller runs: nothing is opened
            await asyncio.sleep(0.02)
            assert agent.kept.asked == [] and not warming.done()
    finally:
        caller.kill()
        caller.wait()
    await asyncio.wait_for(warming, 10)
    assert agent.kept.asked == ["box"]


async def test_no_caller_or_a_gone_one_warms_at_once() -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    for after in (None, int(gone.stdout)):
        agent = _Agent()
        await asyncio.wait_for(lifecycle.prewarm(agent, ["probe", "box"], after), 10)  # type: ignore[arg-type]
        assert agent.kept.asked == ["box"]


class _Stdin(io.StringIO):
    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def test_stdin_tells_the_verb_and_its_process() -> None:
    assert lifecycle._read_warm(_Stdin(b'{"warm": ["probe", "box"], "after": 4242}\n')) == (
        ["probe", "box"],
        4242,
    )
    assert lifecycle._read_warm(_Stdin(b'["probe", "box"]\n')) == (["probe", "box"], None)
    assert lifecycle._read_warm(_Stdin(b'{"warm": ["probe"], "after": true}\n')) == (["probe"], None)
    assert lifecycle._read_warm(_Stdin(b"nonsense\n")) == ([], None)
