"""Every HTTP read from a server has a whole-request deadline and a byte cap (issue 40).

httpx's timeout is per read: a /version (or /health) that streams forever held `bench` (and every
bisection trial) with no output, its memory growing.  A request cut by the benchmark's token guard
must not flood stderr with asyncio's `socket.send() raised exception.` (the port forward wrote
into a socket the client had closed, ~270 lines).  The client against the hostile server on
loopback, and the whole path over the real sshd's forward.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from specdebug.core.bench.serverstate import VERSION_DEADLINE_S, server_state
from specdebug.core.httpread import HttpDeadline, get_bounded
from tests.security.boxkit import run, write_profile
from tests.security.hostile_http import serve

ROOT = Path(__file__).resolve().parents[2]


async def test_a_version_path_that_streams_forever_costs_its_deadline_only() -> None:
    server = await serve("version_endless")
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
            t0 = time.monotonic()
            # the old one never returned: a deadline far past VERSION_DEADLINE_S, not a clock
            st = await asyncio.wait_for(server_state(client, "/health"), 120)
            took = time.monotonic() - t0
    finally:
        server.close()
    print(f"server_state on an endless /version: {took:.1f} s (its deadline {VERSION_DEADLINE_S} s)")
    assert st.health_status == 200 and st.version is None
    assert st.version_note and "more than 65536 bytes" in st.version_note, st.version_note


async def test_a_health_body_that_never_ends_meets_the_whole_deadline() -> None:
    server = await serve("health_endless")
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            url = f"http://127.0.0.1:{port}/health"
            assert (await get_bounded(client, url, deadline_s=2, read_body=False)).status == 200
            with pytest.raises(HttpDeadline, match="no whole answer within 1.5 s"):
                await asyncio.wait_for(get_bounded(client, url, deadline_s=1.5, max_bytes=1 << 40), 120)
            got = await get_bounded(client, url, deadline_s=10, max_bytes=1 << 16)
            assert got.cut and len(got.body) == 1 << 16
    finally:
        server.close()


def hostile_server(mode: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.security.hostile_http", mode],
        stdout=subprocess.PIPE,
        start_new_session=True,
        cwd=ROOT,
    )
    return proc, int(proc.stdout.readline())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["endless", "version_endless"])
def test_bench_over_the_sshd_ends_and_keeps_stderr_clean(sshd, tmp_path: Path, mode: str) -> None:
    server, port = hostile_server(mode)
    try:
        profile = write_profile(
            tmp_path / "hostile.toml",
            "hostile",
            {"argv": ["sim"], "port": port, "log_file": str(tmp_path / "h.log")},
            ready={"health": "/health", "require_ready_line": False},
            bench={"requests": 4, "output_len": 32, "input_len": 8, "warmup_requests": 0, "timeout_s": 30},
        )
        t0 = time.monotonic()
        res = run(sshd, "bench", "gpubox", "-c", str(profile), "--json", timeout=120)
        took = time.monotonic() - t0
        err = res.stderr.decode()
        print(
            f"bench against {mode}: {took:.1f} s, exit {res.returncode}, {len(err.splitlines())} stderr lines"
        )
        assert "socket.send() raised exception" not in err, err[-2000:]
        result = json.loads(res.stdout)
        if mode == "version_endless":
            assert res.returncode == 0, err
            assert any(w.startswith("server version unknown: ") for w in result["warnings"]), result[
                "warnings"
            ]
        else:
            assert (
                result["failed_requests"] == 4 and "kept streaming past max_tokens 32" in result["errors"][0]
            )
    finally:
        server.kill()
        server.wait()
