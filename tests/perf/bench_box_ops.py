"""Port holder, health check and group check: one resident-helper op vs a python3 process per call.

    python tests/perf/bench_box_ops.py [-n N]

The box is this machine behind its own loopback sshd; the test's own HTTP server (the port whose
holder is looked up and whose health is asked) and its own sleeping process group are the only
things touched.  Measured per call (median of N), in the same run:
  helper op     remote.box_op on the resident helper (what specdebug does now)
  python3 -c    the same box module run as `python3 -c` through remote.run on the helper (what
                specdebug did before: no new SSH channel, but one python3 start on the box)
  exec channel  no helper on the box: one SSH exec channel and one python3 per call (the fallback)
Last line:
    RESULT port_holder_ms=A/B/C health_ms=A/B/C check_ms=A/B/C   (helper op / python3 -c / exec channel)
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.remote.boxcode import once_argv  # noqa: E402
from specdebug.remote.client import BoxClient  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402
from tests.sshd_harness import start_sshd  # noqa: E402


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


async def median_ms(call: Callable[[], Awaitable[Any]], n: int) -> float:
    await call()  # warm
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def main(n: int) -> None:
    box = start_sshd(Path(tempfile.mkdtemp(prefix="bench-box-ops-")))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    group = subprocess.Popen(["sleep", "600"], start_new_session=True)
    port = server.server_address[1]
    reqs: dict[str, dict[str, Any]] = {
        "port_holder": {"port": port},
        "health": {"url": f"http://127.0.0.1:{port}/health", "timeout": 2.0},
        "check": {"pgid": group.pid, "start_ticks": 0},
    }
    got: dict[str, list[float]] = {op: [] for op in reqs}
    try:
        for use_helper in (True, False):
            remote = ssh_box(box.alias, ssh_config=box.config_path, use_helper=use_helper)
            await remote.wait_connected(15)
            try:
                for op, req in reqs.items():

                    async def op_call(op: str = op, req: dict[str, Any] = req, r: BoxClient = remote) -> Any:
                        return await r.box_op(op, req)

                    async def process_call(
                        op: str = op, req: dict[str, Any] = req, r: BoxClient = remote
                    ) -> Any:
                        return await r.run(once_argv(op), input=json.dumps(req).encode())

                    if use_helper:
                        got[op].append(await median_ms(op_call, n))
                        got[op].append(await median_ms(process_call, n))
                    else:
                        got[op].append(await median_ms(op_call, n))
            finally:
                await remote.close()
        for op, (a, b, c) in got.items():
            print(f"{op:12} helper op {a:7.1f} ms   python3 -c {b:7.1f} ms   exec channel {c:7.1f} ms")
        print(
            "RESULT " + " ".join(f"{op}_ms={a:.1f}/{b:.1f}/{c:.1f}" for op, (a, b, c) in got.items()),
            flush=True,
        )
    finally:
        group.kill()
        group.wait()
        server.shutdown()
        box.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=25, help="calls per figure (median)")
    asyncio.run(main(ap.parse_args().n))
