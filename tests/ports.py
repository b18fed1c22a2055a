"""Ports for test servers that no other test worker can be handed at the same moment.

`bind(port 0)` returns a port that was free a moment ago; between closing that probe socket and the
server binding it, another xdist worker's probe can get the same port (CI saw a Slurm test's server
refuse to start because a bisection test's trial server held "its" port). Each worker therefore draws
from its own block below the kernel's ephemeral range (so no outgoing connection or product-side
`bind(0)` lands there either), walking from a random offset so concurrent pytest runs rarely meet, and
skips any port that cannot be bound right now.
"""

from __future__ import annotations

import os
import random
import threading

from specdebug.sim.box.ports import bindable

BASE = 20000  # below Linux's default ephemeral range (32768-60999)
BLOCK = 1000  # ports per worker: the first TESTS_SPAN for the tests' own servers, the rest for its sims
TESTS_SPAN = 400
BLOCKS = 12  # workers 0..11 get disjoint blocks; more wrap around (still checked by bind)

_lock = threading.Lock()
_next: int | None = None


def worker_index() -> int:
    """gw3 -> 3; 0 outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = "".join(ch for ch in name if ch.isdigit())
    return int(digits) if digits else 0


def _block_start() -> int:
    """The first port of this worker's block."""
    return BASE + (worker_index() % BLOCKS) * BLOCK


def _own_block() -> int:
    """The first port of this worker's block; the walk starts at a random offset (hold _lock)."""
    global _next
    if _next is None:
        _next = random.randrange(TESTS_SPAN)
    return _block_start()


def free_port(host: str = "127.0.0.1") -> int:
    """A port in this worker's own block, free now, never handed out twice by this process."""
    global _next
    with _lock:
        start = _own_block()
        for _ in range(TESTS_SPAN):
            assert _next is not None
            port = start + _next % TESTS_SPAN
            _next += 1
            if bindable(host, port) and bindable("0.0.0.0", port):
                return port
    raise RuntimeError(f"no free port in {start}-{start + TESTS_SPAN - 1}")


def port_range(n: int, host: str = "127.0.0.1") -> int:
    """The first of `n` consecutive ports in this worker's block, free now and never handed out by
    `free_port` afterwards (a range a server takes later, e.g. Slurm's SrunPortRange: a port of it
    given to a test server made the server refuse "port in use by srun")."""
    global _next
    with _lock:
        start = _own_block()
        for _ in range(BLOCK):
            assert _next is not None
            first = _next % TESTS_SPAN
            if first + n > TESTS_SPAN:  # no wrap inside a range
                _next += TESTS_SPAN - first
                continue
            _next += n
            ports = range(start + first, start + first + n)
            if all(bindable(host, p) and bindable("0.0.0.0", p) for p in ports):
                return start + first
    raise RuntimeError(f"no {n} free ports in a row in {start}-{start + TESTS_SPAN - 1}")


def sim_block() -> str:
    """This worker's sim ports as SPECDEBUG_SIM_PORTS takes them: the rest of its block, where the
    sims its tests start (in-process or by a CLI run) draw their ports, never another worker's."""
    start = _block_start()
    return f"{start + TESTS_SPAN}-{start + BLOCK}"
