"""bench_events / run_benchmark end to end on this machine: a box client over LocalTransport, a fake SSE
server, a log file the "server" appends to during the run, the fake nvidia-smi. Checks that a result
carries fingerprint, server metrics from the log slice, GPU state and warnings, and lands in the journal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specdebug.core.bench.command import substitute
from specdebug.core.bench.events import BenchDone, BenchLine
from specdebug.core.bench.models import BenchProgress
from specdebug.core.bench.runner import BenchError, BenchRequest, bench_events, run_benchmark
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile_text
from specdebug.core.report import history
from specdebug.remote.client import BoxClient
from tests.boxes import local_box, local_env
from tests.fixtures.bench.fake_sse import FakeServerConfig, FakeSSEServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DECODE = (
    "[2026-01-15 12:00:0{i} TP0] Decode batch, #running-req: 1, #token: 300, token usage: 0.01, "
    "accept len: {a:.2f}, accept rate: 0.60, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 0\n"
)


def LocalRemote(gpus_csv: Path | None = None) -> BoxClient:
    """This machine as the box (LocalTransport), the fake nvidia-smi first on PATH; no resident
    helper, so each box operation is one python3, as on a box without one."""
    return local_box(env=local_env(gpus_csv), use_helper=False)


def make_profile(port: int, log: Path, *, command: list[str] | None = None, extra: str = ""):
    cmd = f"command = {command!r}\n".replace("'", '"') if command else ""
    text = f"""
name = "base"
[server]
argv = ["python", "-m", "sglang.launch_server", "--port", "{port}", "--speculative-num-steps", "2"]
env = {{NCCL_PROTO = "Simple", HF_TOKEN = "hf_secretsecret"}}
log_file = "{log}"
[bench]
requests = 3
output_len = 20
input_len = 8
{cmd}{extra}
"""
    return load_profile_text(text)


async def test_builtin_run_records_conditions(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("The server is fired up and ready to roll!\n" + DECODE.format(i=0, a=1.0, g=0.3))
    journal = Journal(tmp_path / "session")
    written = 0

    def progress(p) -> None:  # the "server" logs while the benchmark runs
        nonlocal written
        if p.phase == "running" and written < 3:
            with open(log, "a") as f:
                f.write(DECODE.format(i=written + 1, a=2.5 + written * 0.1, g=80.0 + written))
            written += 1

    async with FakeSSEServer(FakeServerConfig(step_s=0.001, version="0.5.9")) as srv:
        profile = make_profile(srv.port, log)
        res = None
        async for ev in bench_events(LocalRemote(), profile, BenchRequest(requests=2), journal=journal):
            if isinstance(ev, BenchProgress):
                progress(ev)
            elif isinstance(ev, BenchDone):
                res = ev.result
        assert res is not None
    assert res.status == "done" and res.successful_requests == 2 and res.config.output_len == 20
    assert res.profile == "base" and res.server_version == "0.5.9"
    assert res.fingerprint == profile.fingerprint()  # the version is kept beside it, not in it
    assert res.host == "local" and res.started_at and res.finished_at >= res.started_at
    assert res.env["HF_TOKEN"].startswith("<masked") and res.env["NCCL_PROTO"] == "Simple"
    assert res.server is not None and res.server.samples == written == 3
    assert res.server.accept_len == pytest.approx(2.6)
    assert res.server.gen_throughput == pytest.approx(81.5)  # first sample of the slice dropped
    assert len(res.gpu_before) == 4 and len(res.gpu_after) == 4
    assert any(w.startswith("GPU 2 throttled before") for w in res.warnings)
    assert not any("not ready" in w for w in res.warnings)
    entries = history(journal.records())
    assert len(entries) == 1 and entries[0].result.fingerprint == res.fingerprint


async def test_warmup_and_missing_things_become_warnings(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("Load weight begin\n")
    async with FakeSSEServer(FakeServerConfig(step_s=0.0, health_status=503)) as srv:
        profile = make_profile(srv.port, log)
        remote = LocalRemote(gpus_csv=tmp_path / "nope.csv")
        res = await run_benchmark(remote, profile, BenchRequest(requests=1, output_len=5))
    text = "\n".join(res.warnings)
    assert "health answered HTTP 503" in text and "no ready line" in text
    assert res.gpu_before == [] and res.status == "done"


async def test_unreachable_server_raises(tmp_path: Path) -> None:
    async with FakeSSEServer() as srv:
        port = srv.port
    with pytest.raises(BenchError, match="not reachable"):
        await run_benchmark(LocalRemote(), make_profile(port, tmp_path / "x.log"), BenchRequest())


async def test_external_command_output_is_parsed(tmp_path: Path) -> None:
    fixture = FIXTURES / "bench" / "sglang_bench_serving.txt"
    script = tmp_path / "fakebench.py"
    script.write_text(
        "import sys\nprint('port', sys.argv[1], flush=True)\n"
        f"sys.stdout.write(open({str(fixture)!r}).read())\n"
    )
    async with FakeSSEServer() as srv:
        profile = make_profile(srv.port, tmp_path / "x.log", command=[sys.executable, str(script), "{port}"])
        events = [ev async for ev in bench_events(LocalRemote(), profile, BenchRequest(kind="external"))]
    lines = [ev.text for ev in events if isinstance(ev, BenchLine)]
    assert isinstance(events[-1], BenchDone)
    res = events[-1].result
    assert lines[0] == f"port {srv.port}"
    assert res.kind == "external" and res.source_format == "sglang"
    assert res.output_tok_s == 89.34 and res.accept_length == 2.84
    assert res.config.command[-1] == str(srv.port)
    assert res.profile == "base" and res.fingerprint


async def test_external_without_block_fails(tmp_path: Path) -> None:
    async with FakeSSEServer() as srv:
        profile = make_profile(srv.port, tmp_path / "x.log", command=["sh", "-c", "echo oops; exit 3"])
        res = await run_benchmark(LocalRemote(), profile, BenchRequest(kind="external"))
    assert res.status == "failed" and "exit 3" in res.errors[0] and "oops" in res.errors


async def test_external_needs_a_command(tmp_path: Path) -> None:
    async with FakeSSEServer() as srv:
        with pytest.raises(BenchError, match="no \\[bench\\] command"):
            await run_benchmark(
                LocalRemote(), make_profile(srv.port, tmp_path / "x.log"), BenchRequest(kind="external")
            )


def test_substitute_port() -> None:
    assert substitute(["--port", "{port}", "--base-url=http://127.0.0.1:{port}"], 30000) == [
        "--port",
        "30000",
        "--base-url=http://127.0.0.1:30000",
    ]
