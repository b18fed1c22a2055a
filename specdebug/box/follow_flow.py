"""The follow agent's acknowledged flow control, ON THE BOX (specdebug/box/follow.py uses it).

MODE `follow,ack,WINDOW` or `once,ack,WINDOW`: the agent never has more than WINDOW bytes of output
out that the client has not acknowledged (`A<bytes read so far>` lines on stdin); at the limit it
waits for an ack, so a slow reader leaves the rest in the file, not in buffers.  Why not SSH's own
window: asyncssh re-grants a paused channel's whole window each time it hands the reader one
block, so a reader that kept up at a fraction of the rate buffered without bound (RSS +100 MB a
minute at 20k lines/s).  With acks, stdin is ours: there is no watchdog around the agent, so its
EOF (the client closed the channel) ends it.  The client ships this file as a module of its own
and hands `Flow` to follow.py's `run()` (core/logs/agent.py).  Stdlib only, Python >= 3.7.
"""

from __future__ import annotations

import os
import select
import time
from typing import IO


class Flow:
    """fd 1 with a large buffer, counting what went out; the client's acks on stdin."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.n = 0  # bytes written to stdout
        self.window = 0  # 0: no flow control (the client does not ack; stdin is not ours)
        self.acked = 0
        self._buf = b""

    def write(self, b: bytes) -> None:
        self.n += len(b)
        self.f.write(b)

    def flush(self) -> None:
        self.f.flush()

    def wait(self, timeout: float, also: list[int] | None = None) -> bool:
        """Wait up to `timeout` for stdin (acks) or `also`; take every ack that came.  True when
        one of `also` is readable.  EOF on stdin: the client is gone, so the agent ends."""
        fds = ([0] if self.window else []) + (also or [])
        if not fds:
            time.sleep(timeout)
            return False
        ready = select.select(fds, [], [], timeout)[0]
        if 0 in ready:
            data = os.read(0, 65536)
            if not data:
                raise SystemExit(0)
            lines = (self._buf + data).split(b"\n")
            self._buf = lines.pop()
            for line in lines:
                if line[:1] == b"A" and line[1:].isdigit():
                    self.acked = max(self.acked, int(line[1:]))
        return any(fd in ready for fd in also or [])

    def hold(self) -> None:
        """Hold further output while the client has WINDOW bytes or more unacknowledged."""
        while self.window and self.n - self.acked >= self.window:
            self.flush()  # what we hold must reach the client, or its ack never comes
            self.wait(5.0)
