"""A health answer from another process on the server's port is not the server's (issue 41: two
nodes on one machine both bound 127.0.0.1:PORT; node1's server answered node0's health poll, node0
was called ready, and its failure was then quoted as `Application shutdown complete`, uvicorn's
wrapper, not the `[Errno 98]` line above it).

Over the loopback sshd: the profile's command first starts, in a session of its own (not the
launched process group), a plain HTTP server on the port that answers 200 to everything, after
the launch's port check; then the sim, whose uvicorn cannot bind.  `launch --wait` must say FAILED
with the bind line as the reason, never READY."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.cluster_harness import kill_record
from tests.sshd_harness import free_port

pytestmark = pytest.mark.slow

HOLDER = """
import http.server, os, sys
port, pidfile, readyfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def _ok(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        body = b'{"text": "ok", "model_path": "other"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = _ok
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
open(pidfile, "w").write(str(os.getpid()))
open(readyfile, "w").write("1")
srv.serve_forever()
"""


def test_health_answered_by_another_process_is_not_ready_and_the_bind_line_is_the_reason(
    sshd, tmp_path: Path, box_state_dir: Path
) -> None:
    name = f"foreign-{uuid.uuid4().hex[:6]}"
    port = free_port()
    holder, pidfile, readyfile = tmp_path / "holder.py", tmp_path / "holder.pid", tmp_path / "holder.ready"
    holder.write_text(HOLDER)
    py = shlex.quote(sys.executable)
    sim = shlex.join(
        [sys.executable, "-m", "specdebug.sim", "--tp", "2", "--port", str(port), "--time-scale", "0.02"]
        + ["--log-file", str(tmp_path / "sim.log")]
    )
    script = (
        f"setsid {py} {shlex.quote(str(holder))} {port} {shlex.quote(str(pidfile))} "
        f"{shlex.quote(str(readyfile))} </dev/null >/dev/null 2>&1 & "
        f"for i in $(seq 400); do [ -s {shlex.quote(str(readyfile))} ] && break; sleep 0.05; done; exec {sim}"
    )
    profile = tmp_path / f"{name}.toml"
    profile.write_text(
        f"name = {json.dumps(name)}\n[server]\nargv = {json.dumps(['sh', '-c', script])}\n"
        f'kind = "sglang"\nlog_file = {json.dumps(str(tmp_path / "server.log"))}\nport = {port}\n'
        "[ready]\ntimeout_s = 60\nrequire_ready_line = false\n"  # health alone may say ready
    )
    cmd = [sys.executable, "-m", "specdebug.cli", "launch", "-F", str(sshd.config_path), sshd.alias]
    try:
        r = subprocess.run(
            [*cmd, "-c", str(profile), "--wait", "--json"], capture_output=True, text=True, timeout=120
        )
        assert readyfile.exists(), r.stderr  # the other server did hold the port
        out = json.loads(r.stdout)
        assert out["verdict"] == "failed", (out, r.stderr)
        assert r.returncode == 1
        assert "[Errno 98]" in out["reason"] and "address already in use" in out["reason"], out["reason"]
        assert "Application shutdown complete" not in out["reason"]
        holder_pid = pidfile.read_text()
        assert f"answered by another process (port {port} is in use by PID {holder_pid}" in out["reason"]
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
        kill_record(box_state_dir / f"{name}.json", name)
