"""`bench` measures the recorded server, never whoever holds the port.

Over the real sshd with throwaway box users.  Before, a benchmark connected to the profile's port
and measured (and journaled as ours) whatever listened there: another user's process that took the
port while our server was down, or a stray process of our own.  Now the listener must be in the
recorded server's process group; otherwise the benchmark stops with a sentence saying whose the
port is, and nothing is journaled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.security.boxkit import unique, write_profile
from tests.security.boxusers import box_users, cli, skip_reason, users_sshd
from tests.sshd_harness import free_port

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(64); print('up', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    c.recv(65536)\n"
    "    c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}')\n"
    "    c.close()\n"
)


@pytest.fixture(scope="module")
def sshd():
    with users_sshd() as server:
        yield server


class Listener:
    """A process of `user` answering HTTP 200 on 127.0.0.1:port (its own process group, ours to kill)."""

    def __init__(self, user: str, port: int) -> None:
        self.proc = subprocess.Popen(
            ["runuser", "-u", user, "--", "/usr/bin/python3", "-c", LISTEN, str(port)],
            stdout=subprocess.PIPE,
            start_new_session=True,
            cwd="/",
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == b"up"

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


def bench(user, prof: Path, session: Path) -> subprocess.CompletedProcess:
    return cli(
        user, "bench", user.alias, "-c", str(prof), "--requests", "1", "--output-len", "4",
        "--session", str(session), "--json", timeout=180,
    )  # fmt: skip


def journaled(session: Path) -> list[dict]:
    path = session / "events.jsonl"
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e.get("kind") == "bench_result"]


def test_bench_refuses_another_users_listener_and_a_stray_one(sshd, tmp_path: Path) -> None:
    with box_users(sshd, 2) as (victim, attacker):
        port = free_port()
        prof = write_profile(
            tmp_path / "p.toml",
            unique("held"),
            {"argv": ["sleep", "300"], "port": port, "kind": "custom"},
            ready={"require_ready_line": False},
        )
        session = tmp_path / "session"
        squatter = Listener(attacker.name, port)  # our server is not running; the attacker took the port
        try:
            r = bench(victim, prof, session)
            assert r.returncode == 1, r.stdout
            assert f"another user's process: {attacker.name} (uid {attacker.uid})" in r.stderr, r.stderr
            assert "not benchmarking" in r.stderr and "Traceback" not in r.stderr
            assert journaled(session) == []
        finally:
            squatter.close()

        # our own server is recorded (launched, not listening); a stray process of ours holds the port
        r = cli(victim, "launch", victim.alias, "-c", str(prof), "--json")
        assert r.returncode == 0, r.stderr
        record = json.loads(r.stdout)
        stray = Listener(victim.name, port)
        try:
            r = bench(victim, prof, session)
            assert r.returncode == 1, r.stdout
            assert f"recorded server (PGID {record['pgid']})" in r.stderr, r.stderr
            assert "is in use by PID" in r.stderr and "python3" in r.stderr, r.stderr  # says whose it is
            assert journaled(session) == []
        finally:
            stray.close()
            os.killpg(int(record["pgid"]), signal.SIGKILL)
            time.sleep(0.2)
