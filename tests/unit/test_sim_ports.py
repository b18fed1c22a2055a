"""A sim's port (the demo's, a local sim's) lies below the kernel's ephemeral range, where no
outgoing connection or `bind(0)` can take it before the sim binds it (a demo test once found "its"
port held by another process's connection)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from specdebug.demo import run
from specdebug.sim.box import local, ports
from tests import ports as test_ports


def ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_the_port_is_below_the_ephemeral_range_and_free(monkeypatch) -> None:
    monkeypatch.delenv(ports.PORTS_VAR, raising=False)  # the default range (the suite sets its own)
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
        monkeypatch.setattr(ports.random.SystemRandom, "sample", lambda self, span, k: [busy, free])
        assert ports.free_port(tries=2) == free


def test_the_demo_and_local_sims_take_it() -> None:
    assert run.free_port is ports.free_port and local.free_port is ports.free_port


def test_the_range_can_be_set_and_a_wrong_one_is_named(monkeypatch) -> None:
    monkeypatch.setenv(ports.PORTS_VAR, "12000-12010")
    assert all(12000 <= ports.free_port() < 12010 for _ in range(20))
    for wrong in ("12000", "12010-12000", "80-90", "a-b", "12000-70000"):
        monkeypatch.setenv(ports.PORTS_VAR, wrong)
        with pytest.raises(ValueError, match=f"SPECDEBUG_SIM_PORTS={wrong!r}: expected LOW-HIGH"):
            ports.free_port()


def test_each_test_worker_draws_its_sims_ports_from_its_own_block(monkeypatch) -> None:
    """Two workers' sims never meet (a sim binds its port seconds after drawing it), and no sim's
    port is one the worker hands its own test servers."""
    assert os.environ.get(ports.PORTS_VAR) == test_ports.sim_block()  # tests/conftest.py, for this worker
    spans = []
    for worker in ("gw0", "gw1", "gw7"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        low, high = map(int, test_ports.sim_block().split("-"))
        spans.append(range(low, high))
        start = test_ports.BASE + test_ports.worker_index() * test_ports.BLOCK
        assert start + test_ports.TESTS_SPAN == low and high == start + test_ports.BLOCK
    assert all(not set(a) & set(b) for a in spans for b in spans if a is not b)


def test_a_port_handed_out_is_not_handed_again_before_its_server_binds_it(monkeypatch) -> None:
    """Two servers of one test (a 2-node sim's rendezvous and API ports) are handed their ports
    before either binds: never the same one (CI, 2026-12-06: `[Errno 98]` on node 0's API port)."""
    low = test_ports.port_range(8)
    monkeypatch.setenv(ports.PORTS_VAR, f"{low}-{low + 8}")
    drawn = [ports.free_port() for _ in range(8)]
    assert sorted(drawn) == list(range(low, low + 8))
