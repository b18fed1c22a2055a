"""The follow agent's acknowledged flow control (box/follow.py), run here as the box would run it.

With `MODE,ack,WINDOW` the agent never has more than WINDOW bytes (plus the block in hand) out
unacknowledged: a reader that stops acking stops the agent, not the bytes; acks let it go on to
the end; stdin's EOF (the client closed the channel) ends it even while it waits.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.agent import agent_argv

LINE = b"Decode batch, accept len: 2.50 " + b"x" * 90 + b"\n"
WINDOW = 64 << 10
BLOCK = MAX_LINE  # the most the agent reads (and sends) in one go


def start(path: Path, once: bool) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        agent_argv(str(path), 0, None, [], once=once, ack=WINDOW),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


def read_for(proc: subprocess.Popen[bytes], seconds: float, quiet: float | None = None) -> bytes:
    """What the agent writes within `seconds` (or until it is quiet for `quiet` s after some)."""
    assert proc.stdout is not None
    got = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if select.select([proc.stdout], [], [], quiet or 0.1)[0]:
            data = os.read(proc.stdout.fileno(), 1 << 20)
            if not data:
                break
            got += data
        elif quiet is not None and got:
            break
    return got


def test_agent_waits_for_acks_and_ends_at_stdin_eof(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(LINE * 10_000)  # 1.2 MB: many windows
    proc = start(log, once=True)
    assert proc.stdin is not None
    try:
        first = b""
        deadline = time.monotonic() + 30
        while len(first) < WINDOW and time.monotonic() < deadline:
            first += read_for(proc, 0.2)
        first += read_for(proc, 1.0)  # and whatever more it sends without an ack
        assert WINDOW <= len(first) <= WINDOW + BLOCK + 4096, len(first)  # held at the window
        total = len(first)
        while proc.poll() is None:
            try:
                proc.stdin.write(b"A%d\n" % total)
                proc.stdin.flush()
            except BrokenPipeError:  # it sent the last of it and ended meanwhile
                pass
            more = read_for(proc, 5.0, quiet=0.1)
            total += len(more)
        total += len(read_for(proc, 5.0))  # the rest, up to its EOF
        assert proc.wait(60) == 0  # a deadline, not a clock: a busy machine starts python slowly
        assert total >= log.stat().st_size  # every line went out once acked
    finally:
        proc.kill()
        proc.wait()

    proc = start(log, once=False)  # following: held at the window, then the client goes
    assert proc.stdin is not None
    held, deadline = b"", time.monotonic() + 60  # its window sent: waited for, not 1 s of a clock (a
    while len(held) < WINDOW and time.monotonic() < deadline:  # loaded machine starts python slowly)
        held += read_for(proc, 0.2)
    assert len(held) >= WINDOW, len(held)
    proc.stdin.close()
    read_for(proc, 60)  # drained to its EOF: a write into a full pipe never holds it
    assert proc.wait(60) == 0  # ended by stdin's EOF, not left behind
