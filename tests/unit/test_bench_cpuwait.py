"""A benchmark names CPU contention over its run, on the box (the server's) and on this machine (the
built-in client's), from Linux's CPU pressure: a figure read on a starved CPU is slow for a reason
that is not the profile.  The run itself is real (this machine as the box, a fake SSE server); the
pressure file is one the test writes, so the shares are known."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from specdebug.core.bench import cpuwait
from specdebug.core.bench.cpuwait import Pressure, parse_some_total, share
from specdebug.core.bench.events import BenchDone
from specdebug.core.bench.models import BenchProgress
from specdebug.core.bench.runner import BenchRequest, bench_events
from tests.fixtures.bench.fake_sse import FakeServerConfig, FakeSSEServer
from tests.unit.test_bench_runner import LocalRemote, make_profile

PSI = "some avg10=1.00 avg60=0.50 avg300=0.10 total={some}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def test_the_some_total_is_read_and_anything_else_is_none() -> None:
    assert parse_some_total(PSI.format(some=45576861235)) == 45576861235
    assert parse_some_total("full avg10=0.00 total=7\n") is None
    assert parse_some_total("some avg10=0.00 total=x\n") is None
    assert parse_some_total("") is None


def test_the_share_is_the_stall_over_the_wall_time() -> None:
    assert share(Pressure(0, 10.0), Pressure(500_000, 12.0)) == pytest.approx(0.25)
    assert share(Pressure(0, 10.0), Pressure(10**12, 11.0)) == 1.0  # "some" is at most the whole time
    assert share(None, Pressure(1, 1.0)) is None
    assert share(Pressure(5, 1.0), Pressure(4, 2.0)) is None  # a counter that went back: not a reading
    assert share(Pressure(1, 2.0), Pressure(2, 2.0)) is None


def test_a_warning_names_the_side_the_figure_and_its_source_only_above_the_threshold() -> None:
    assert cpuwait.warnings(0.05, 0.09, "gpubox") == []
    assert cpuwait.warnings(None, None, "gpubox") == []
    box, client = cpuwait.warnings(0.43, 0.5, "gpubox")
    assert box.startswith("CPU contended on gpubox during the run") and "43%" in box and "CPU pressure" in box
    assert client.startswith("CPU contended on this machine (the benchmark client)") and "50%" in client


async def _bench(
    tmp_path: Path, psi: Path, stall_during_run: int, kind: Literal["builtin", "external"] = "builtin"
):
    log = tmp_path / "server.log"
    log.write_text("The server is fired up and ready to roll!\n")
    psi.write_text(PSI.format(some=1000))
    async with FakeSSEServer(FakeServerConfig(step_s=0.001)) as srv:
        command = ["sh", "-c", "echo oops; exit 3"] if kind == "external" else None
        profile = make_profile(srv.port, log, command=command)
        async for ev in bench_events(LocalRemote(), profile, BenchRequest(kind=kind, requests=2)):
            if isinstance(ev, BenchProgress) and ev.phase == "running":
                psi.write_text(PSI.format(some=1000 + stall_during_run))
            elif isinstance(ev, BenchDone):
                return ev.result
    raise AssertionError("no result")


async def test_a_run_on_a_starved_cpu_says_so_for_the_box_and_the_client(tmp_path: Path, monkeypatch) -> None:
    psi = tmp_path / "cpu"
    monkeypatch.setattr(cpuwait, "PSI_CPU", str(psi))  # this machine is the box: both read this file
    res = await _bench(tmp_path, psi, stall_during_run=10**15)
    assert res.box_cpu_wait == 1.0 and res.client_cpu_wait == 1.0
    text = "\n".join(res.warnings)
    assert "CPU contended on local during the run: some task waited for a CPU 100%" in text
    assert "CPU contended on this machine (the benchmark client)" in text


async def test_a_run_on_a_free_cpu_has_no_cpu_warning(tmp_path: Path, monkeypatch) -> None:
    psi = tmp_path / "cpu"
    monkeypatch.setattr(cpuwait, "PSI_CPU", str(psi))
    res = await _bench(tmp_path, psi, stall_during_run=0)
    assert res.box_cpu_wait == 0.0 and res.client_cpu_wait == 0.0
    assert not any(w.startswith("CPU contended") for w in res.warnings), res.warnings


async def test_without_pressure_nothing_is_claimed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cpuwait, "PSI_CPU", str(tmp_path / "absent"))
    log = tmp_path / "server.log"
    log.write_text("The server is fired up and ready to roll!\n")
    async with FakeSSEServer(FakeServerConfig(step_s=0.001)) as srv:
        async for ev in bench_events(LocalRemote(), make_profile(srv.port, log), BenchRequest(requests=2)):
            if isinstance(ev, BenchDone):
                res = ev.result
    assert res.box_cpu_wait is None and res.client_cpu_wait is None
    assert not any(w.startswith("CPU contended") for w in res.warnings)


async def test_an_external_run_measures_the_box_only(tmp_path: Path, monkeypatch) -> None:
    psi = tmp_path / "cpu"
    monkeypatch.setattr(cpuwait, "PSI_CPU", str(psi))
    res = await _bench(tmp_path, psi, stall_during_run=10**15, kind="external")
    assert res.box_cpu_wait == 1.0 and res.client_cpu_wait is None  # its client ran on the box


async def test_a_deployment_reads_every_node_and_names_the_contended_one(tmp_path: Path, monkeypatch) -> None:
    """A starved node holds the whole deployment back: every node's CPU pressure is read over the run
    (here two box clients of this machine, node1's pressure file its own), the result keeps each node's
    share and its worst as `box_cpu_wait`, and the warning names node1."""
    quiet, busy = tmp_path / "cpu0", tmp_path / "cpu1"
    quiet.write_text(PSI.format(some=1000))
    busy.write_text(PSI.format(some=1000))
    monkeypatch.setattr(cpuwait, "PSI_CPU", str(quiet))
    node1 = LocalRemote()
    real_read = node1.read_files

    async def node1_reads(paths, *args, **kwargs):  # node1's /proc/pressure/cpu is its own file
        return await real_read([str(busy) if p == cpuwait.PSI_CPU else p for p in paths], *args, **kwargs)

    monkeypatch.setattr(node1, "read_files", node1_reads)
    log = tmp_path / "server.log"
    log.write_text("The server is fired up and ready to roll!\n")
    leader = LocalRemote()
    async with FakeSSEServer(FakeServerConfig(step_s=0.001)) as srv:
        events = bench_events(leader, make_profile(srv.port, log), BenchRequest(requests=2),
                              host="node0", nodes={"node0": leader, "node1": node1})  # fmt: skip
        async for ev in events:
            if isinstance(ev, BenchProgress) and ev.phase == "running":
                busy.write_text(PSI.format(some=1000 + 10**15))
            elif isinstance(ev, BenchDone):
                res = ev.result
    assert res.cpu_wait_by_node == {"node0": 0.0, "node1": 1.0} and res.box_cpu_wait == 1.0
    cpu = [w for w in res.warnings if w.startswith("CPU contended on node")]
    assert len(cpu) == 1 and cpu[0].startswith("CPU contended on node1 during the run"), res.warnings
