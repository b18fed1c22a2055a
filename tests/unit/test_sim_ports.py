"""A sim's port (the demo's, a local sim's) lies below the kernel's ephemeral range, where no
outgoing connection or `bind(0)` can take it before the sim binds it (a demo test once found "its"
port held by another process's connection)."""

from __future__ import annotations

import socket
from pathlib import Path

from specdebug.demo import run
from specdebug.sim.box import local, ports


def ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_the_port_is_below_the_ephemeral_range_and_free() -> None:
    drawn = {ports.free_port() for _ in range(20)}
    assert all(ports.SIM_PORTS[0] <= p < ports.SIM_PORTS[1] < ephemeral_low() for p in drawn)
    assert len(drawn) > 1  # random: two demos rarely meet
    port = drawn.pop()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_taken_port_is_skipped(monkeypatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        draws = iter([busy, busy, free])
        monkeypatch.setattr(ports.random.SystemRandom, "randrange", lambda self, a, b: next(draws))
        assert ports.free_port(tries=3) == free


def test_the_demo_and_local_sims_take_it() -> None:
    assert run.free_port is ports.free_port and local.free_port is ports.free_port
