"""A simulated server's processes import only what they use: a suite run makes about 220 launches,
each with tp + 1 spawned processes (schedulers, detokenizer, vLLM workers), so each import is paid
hundreds of times (asyncio with ssl was about 30 ms of a scheduler's ~145 ms start; httpx and its
client, for the launcher's one warmup request, about a third of the launcher's CPU up to ready)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from specdebug.sim.box.local import start_local_sim

# what the spawned processes run: the main module multiprocessing re-imports, then their targets
CHILD = (
    "import sys, multiprocessing.spawn, multiprocessing.connection\n"
    "import specdebug.sim.__main__\n"
    "import specdebug.sim.server.sglang.worker, specdebug.sim.server.vllm.procs\n"
    "print(' '.join(sorted(m for m in ('asyncio', 'starlette', 'uvicorn', 'httpx') if m in sys.modules)))\n"
)


def test_a_spawned_sim_process_does_not_import_the_launchers_event_loop_or_http_stack() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "", f"a spawned sim process imports {out.stdout.strip()}"


def test_a_sim_launch_warms_up_without_httpx(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        sim = start_local_sim(
            ["--tp", "1"],
            log_file=tmp_path / "sim.log",
            time_scale=0,
            stdout=fh,
            extra_env={"PYTHONPROFILEIMPORTTIME": "1"},
        )
        with sim:
            sim.wait_ready()
    imported = [line for line in out.read_text().splitlines() if line.startswith("import time:")]
    assert imported, "no import was reported (PYTHONPROFILEIMPORTTIME)"
    assert not [line for line in imported if line.rstrip().endswith("| httpx")]
    assert (
        'POST /generate HTTP/1.1" 200' in (tmp_path / "sim.log").read_text()
    )  # the warmup, as SGLang sends it


async def test_the_warmup_client_reads_a_status_and_refuses_what_is_not_http() -> None:
    import asyncio

    from specdebug.sim.server.common.localhttp import status_of

    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\n\r\nbusy" if len(seen) == 1 else b"hello\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    address = ("127.0.0.1", server.sockets[0].getsockname()[1])
    async with server:
        assert await status_of(address, "GET", "/model_info", timeout=5) == 503
        try:
            await status_of(address, "POST", "/generate", {"text": "x"}, timeout=5)
        except ValueError as exc:
            assert "not an HTTP answer" in str(exc)
        else:
            raise AssertionError("a line that is not HTTP was taken for a status")
    assert (
        seen[0].startswith(b"GET /model_info HTTP/1.1\r\nHost: 127.0.0.1:")
        and b"Connection: close" in seen[0]
    )
    assert b"Content-Type: application/json" in seen[1]
