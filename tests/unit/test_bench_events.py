"""The bench service as one stream of typed events: progress, then exactly one BenchDone last; an
external run's output as BenchLine events; closing the stream early stops the run and records nothing.
(The local Remote stand-in and fake SSE server of test_bench_runner.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specdebug.core.bench.events import BenchDone, BenchLine
from specdebug.core.bench.models import BenchProgress
from specdebug.core.bench.runner import BenchError, BenchRequest, bench_events
from specdebug.core.journal import Journal
from tests.fixtures.bench.fake_sse import FakeServerConfig, FakeSSEServer
from tests.unit.test_bench_runner import LocalRemote, make_profile


async def test_builtin_stream_ends_in_one_result(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "session")
    async with FakeSSEServer(FakeServerConfig(step_s=0.002)) as srv:
        profile = make_profile(srv.port, tmp_path / "server.log")
        events = [
            ev
            async for ev in bench_events(
                LocalRemote(), profile, BenchRequest(requests=3, output_len=10), journal=journal
            )
        ]
    done = [ev for ev in events if isinstance(ev, BenchDone)]
    assert len(done) == 1 and events[-1] is done[0]
    assert all(isinstance(ev, BenchProgress) for ev in events[:-1]) and len(events) > 1
    last = [ev for ev in events if isinstance(ev, BenchProgress)][-1]
    assert last.total_requests == 3 and last.done_requests == 3
    assert done[0].result.successful_requests == 3
    assert [e["kind"] for e in journal.events()] == ["bench_result"]  # journaled before BenchDone


async def test_external_lines_are_their_own_events(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text("print('one')\nprint('two hf_secretsecret')\n")
    cmd = [sys.executable, str(script)]
    async with FakeSSEServer() as srv:
        profile = make_profile(srv.port, tmp_path / "x.log", command=cmd)
        events = [ev async for ev in bench_events(LocalRemote(), profile, BenchRequest(kind="external"))]
    lines = [ev.text for ev in events if isinstance(ev, BenchLine)]
    assert lines[0] == "one" and lines[1].startswith("two") and "hf_secretsecret" not in lines[1]
    assert isinstance(events[-1], BenchDone) and events[-1].result.status == "failed"  # no result block


async def test_closing_the_stream_stops_the_run_and_records_nothing(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "session")
    async with FakeSSEServer(FakeServerConfig(step_s=0.05)) as srv:
        profile = make_profile(srv.port, tmp_path / "server.log")
        stream = bench_events(
            LocalRemote(), profile, BenchRequest(requests=50, output_len=50), journal=journal
        )
        async for ev in stream:
            assert isinstance(ev, BenchProgress)
            break
        await stream.aclose()
    assert journal.events() == []


async def test_errors_propagate_from_the_stream(tmp_path: Path) -> None:
    async with FakeSSEServer() as srv:
        port = srv.port
    with pytest.raises(BenchError, match="not reachable"):
        async for _ in bench_events(LocalRemote(), make_profile(port, tmp_path / "x.log"), BenchRequest()):
            pass
