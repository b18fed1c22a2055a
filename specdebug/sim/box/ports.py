"""A port for a simulated server, chosen here and bound by the server a moment later (the demo's
sim, a local sim).

Why not `bind(0)`: it hands out a port of the kernel's ephemeral range, which any outgoing
connection may take as its local port before the server binds it (a demo test found "its" port
"in use by PID ..."). Below that range only an explicit bind can take it.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from collections import deque

SIM_PORTS = (10000, 20000)  # below Linux's default ephemeral range (32768-60999) and the tests' blocks
# LOW-HIGH: draw from these instead (a firewall's open range; a test worker's own block)
PORTS_VAR = "SPECDEBUG_SIM_PORTS"


def sim_ports() -> tuple[int, int]:
    """The range a sim's port is drawn from: $SPECDEBUG_SIM_PORTS (`LOW-HIGH`, HIGH excluded) or SIM_PORTS."""
    text = os.environ.get(PORTS_VAR, "").strip()
    if not text:
        return SIM_PORTS
    low, sep, high = text.partition("-")
    try:
        lo, hi = int(low), int(high)
    except ValueError:
        lo = hi = 0
    if not sep or not 1024 <= lo < hi <= 65536:
        raise ValueError(
            f"{PORTS_VAR}={text!r}: expected LOW-HIGH, two port numbers from 1024 to 65536, LOW < HIGH"
        )
    return lo, hi


def bindable(host: str, port: int) -> bool:
    """Can `port` be bound on `host` right now (a probe: closed at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))  # no SO_REUSEADDR: a port in TIME_WAIT counts as taken
        except OSError:
            return False
    return True


# the ports this process handed out lately: free when handed, but bound by their server only later
# (CI, 2026-12-06: a 2-node sim's API port was drawn equal to its rendezvous port, handed a moment
# before and bound by node 0 first: "[Errno 98] ... address already in use")
_HANDED: deque[int] = deque(maxlen=256)
_lock = threading.Lock()


def free_port(host: str = "127.0.0.1", tries: int = 64) -> int:
    """A port of sim_ports() that can be bound on `host` now, one this process has not handed out
    lately where the range has one (random, so two processes' sims rarely meet); bind(0)'s if none of
    `tries` can."""
    lo, hi = sim_ports()
    drawn = random.SystemRandom().sample(range(lo, hi), min(tries, hi - lo))
    with _lock:
        fresh = [p for p in drawn if p not in _HANDED]
        for port in fresh + [p for p in _HANDED if p in drawn]:  # then the least lately handed
            if bindable(host, port):
                if port in _HANDED:
                    _HANDED.remove(port)
                _HANDED.append(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
