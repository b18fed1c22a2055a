"""A hostile server cannot hang, flood or fool the benchmark (issue 22).

Each request has a whole-request deadline and stops at the tokens asked for plus a small slack
(said in the result's config); a stream line is bounded; usage figures that cannot be true
(10^15, negative, 10^6 for 32 asked) fail the request with the reason and count as failed.  The
client against the hostile server on loopback, and the whole path over the real sshd's forward.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from specdebug.core.bench.builtin import BuiltinParams, run_builtin
from specdebug.core.bench.stream_guard import bounded_lines, token_slack
from specdebug.core.journal import Journal
from tests.security.boxkit import run, write_profile
from tests.security.hostile_http import serve


async def bench(mode: str, **kw) -> object:
    server = await serve(mode)
    port = server.sockets[0].getsockname()[1]
    params = BuiltinParams(requests=2, warmup_requests=0, input_len=4, output_len=32, **kw)
    try:
        return await run_builtin(f"http://127.0.0.1:{port}", params)
    finally:
        server.close()


async def test_endless_stream_stops_past_the_tokens_asked() -> None:
    res = await bench("endless", timeout_s=60)  # the guard's error, not the 60 s deadline's
    assert res.failed_requests == 2 and res.successful_requests == 0
    assert "kept streaming past max_tokens 32" in res.errors[0]
    assert f"slack {token_slack(32)}" in res.errors[0]
    assert res.config.token_slack == token_slack(32) and res.config.request_deadline_s == 60


async def test_a_stream_without_tokens_meets_the_whole_request_deadline() -> None:
    res = await bench("keepalive", timeout_s=1.5)  # every read succeeds: only a whole deadline ends it
    assert res.failed_requests == 2
    assert res.errors[0] == "no end of the stream after 1.5 s (the whole-request deadline)"


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("usage_huge", "usage.completion_tokens = 1000000000000000, more than the 32 asked (+8 slack)"),
        ("usage_negative", "usage.completion_tokens = -5, a negative count"),
        ("usage_over", "usage.completion_tokens = 1000000, more than the 32 asked (+8 slack)"),
    ],
)
async def test_impossible_usage_fails_the_request_with_the_reason(mode: str, why: str) -> None:
    res = await bench(mode)
    assert res.failed_requests == 2 and res.successful_requests == 0 and res.status == "failed"
    assert why in res.errors[0]
    assert res.output_tok_s is None  # no figure from an impossible count


async def test_a_300_mb_line_is_refused_before_it_is_held() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res = await bench("huge_line", timeout_s=60)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert res.failed_requests == 2
    assert "a stream line of more than 1048576 bytes (refused)" in res.errors[0]
    assert grown_mib < 200, f"peak RSS grew {grown_mib:.0f} MiB"


async def test_lines_split_on_every_sse_line_end() -> None:
    async def parts(*chunks: bytes):
        for c in chunks:
            yield c

    got = [x async for x in bounded_lines(parts(b"a\r", b"\nb\rc\n", b"d"))]
    assert got == ["a", "b", "c", "d"]


@pytest.mark.slow
def test_impossible_usage_over_the_sshd_is_a_failed_run(sshd, tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.security.hostile_http", "usage_over"],
        stdout=subprocess.PIPE,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        port = int(server.stdout.readline())
        profile = write_profile(
            tmp_path / "hostile.toml",
            "hostile",
            {"argv": ["sim"], "port": port, "log_file": str(tmp_path / "h.log")},
            bench={"requests": 4, "output_len": 32, "input_len": 8, "warmup_requests": 0},
        )
        session = tmp_path / "session"
        res = run(sshd, "bench", "gpubox", "-c", str(profile), "--session", str(session), "--json")
        assert res.returncode == 1, res.stderr
        recorded = Journal(session).events({"bench_result"})[-1]
        assert recorded["status"] == "failed" and recorded["failed_requests"] == 4
        assert "completion_tokens = 1000000, more than the 32 asked" in recorded["failure_reason"]
        assert json.loads(res.stdout)["config"]["token_slack"] == 8
    finally:
        server.kill()
        server.wait()
