"""The box-side modules (specdebug/box), run locally exactly as the box runs them.

Each is started the way the client ships it (`python3 -c` with the bundle or the module source,
`sh -c` with the script), against temp files, a listening socket and an HTTP server of this test,
and process groups this test starts itself; nothing else on the machine is looked at or signalled.
"""

from __future__ import annotations

import http.server
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specdebug.box.procctl import HELPER_MARK
from specdebug.core.control.launch import LAUNCH_REPORT, LAUNCH_SCRIPT, parse_launch_report
from specdebug.remote.api import RemoteError, RunResult
from specdebug.remote.boxcode import helper_argv, once_argv, once_reply, python_argv, source
from specdebug.remote.probe import READ_FILES_SH, parse_read_files
from tests.boxframes import read_frame


def local(argv: list[str]) -> list[str]:
    """The box's `python3` is this interpreter here."""
    return [sys.executable, *argv[1:]] if argv[0] == "python3" else argv


class Helper:
    """The resident helper bundle as the SSH exec channel starts it, spoken to over its pipes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(local(helper_argv()), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.hello = read_frame(self.proc.stdout)
        self._id = 0

    def op(self, name: str, /, **args: Any) -> dict[str, Any]:
        self._id += 1
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps({"id": self._id, "op": name, "args": args}) + "\n").encode())
        self.proc.stdin.flush()
        resp = read_frame(self.proc.stdout)
        assert resp["id"] == self._id and resp["ok"], resp
        return dict(resp["result"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture
def helper() -> Iterator[Helper]:
    h = Helper()
    try:
        yield h
    finally:
        h.close()


def once(op: str, /, **args: Any) -> dict[str, Any]:
    """The helper-less path: one python3 process answers one op."""
    r = subprocess.run(local(once_argv(op)), input=json.dumps(args).encode(), capture_output=True, timeout=60)
    return once_reply(op, RunResult(exit_status=r.returncode, stdout=r.stdout, stderr=r.stderr))


def start_ticks(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return int(raw[raw.rfind(")") + 2 :].split()[19])


@pytest.fixture
def own_group() -> Iterator[subprocess.Popen[bytes]]:
    """A sleeping process leading its own group and session: the only thing these tests signal."""
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)


# -- shipping ---------------------------------------------------------------------------------------


def test_the_helper_boot_carries_the_mark_process_control_refuses() -> None:
    """procctl never signals a group holding a helper; it knows one by this text in its command line."""
    assert HELPER_MARK in " ".join(helper_argv())
    assert HELPER_MARK not in " ".join(once_argv("check"))  # the one-shot process is no resident helper


def test_sources_come_from_the_package() -> None:
    box = Path(__file__).resolve().parents[2] / "specdebug" / "box"
    for name in (
        "helper.py",
        "procctl.py",
        "ports.py",
        "health.py",
        "follow.py",
        "launch.sh",
        "read_files.sh",
    ):
        assert source(name) == (box / name).read_text()


# -- port holder ------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6])
def test_port_holder_finds_this_process_listening(helper: Helper, family: socket.AddressFamily) -> None:
    host = "127.0.0.1" if family == socket.AF_INET else "::1"
    with socket.socket(family) as s:
        try:
            s.bind((host, 0))
        except OSError:
            pytest.skip(f"no {host} on this machine")
        s.listen()
        port = s.getsockname()[1]
        got = helper.op("port_holder", port=port)
        assert got["listening"] and os.getpid() in got["pids"]
        me = pwd.getpwuid(os.getuid()).pw_name
        assert got["owners"] == [{"uid": os.getuid(), "user": me}] and got["self_uid"] == os.getuid()
        assert once("port_holder", port=port)["pids"] == got["pids"]  # the fallback says the same


def test_port_holder_bound_but_not_listening_is_free(helper: Helper) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: nobody can connect
        got = helper.op("port_holder", port=s.getsockname()[1])
    assert got == {"listening": False, "pids": [], "cmdline": [], "owners": [], "self_uid": os.getuid()}


def test_connected_to_names_the_pids_holding_a_connection_to_the_port(helper: Helper) -> None:
    """A deployment node's processes joined the leader's rendezvous port, or not (deployment watch)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert helper.op("connected_to", port=port, pids=[os.getpid()]) == {"pids": []}
        with socket.create_connection(("127.0.0.1", port)):
            conn, _ = server.accept()
            with conn:
                assert helper.op("connected_to", port=port, pids=[os.getpid(), 1]) == {"pids": [os.getpid()]}
                assert once("connected_to", port=port, pids=[os.getpid()]) == {"pids": [os.getpid()]}


# -- health -----------------------------------------------------------------------------------------


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.send_response(200 if self.path == "/health" else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_health_status_codes_and_no_answer(helper: Helper, http_port: int) -> None:
    base = f"http://127.0.0.1:{http_port}"
    assert helper.op("health", url=base + "/health", timeout=5) == {"status": 200}
    assert helper.op("health", url=base + "/starting", timeout=5) == {"status": 503}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound by us and not listening: connection refused
        assert helper.op("health", url=f"http://127.0.0.1:{closed}/health", timeout=5) == {"status": 0}
    assert once("health", url=base + "/health", timeout=5) == {"status": 200}


def test_health_ignores_the_proxy_of_the_environment(http_port: int) -> None:
    env = {**os.environ, "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    r = subprocess.run(
        local(once_argv("health")),
        input=json.dumps({"url": f"http://127.0.0.1:{http_port}/health", "timeout": 5}).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert once_reply("health", RunResult(exit_status=r.returncode, stdout=r.stdout, stderr=r.stderr)) == {
        "status": 200
    }


# -- group signals (procctl inside the helper) ------------------------------------------------------


def identity(p: subprocess.Popen[bytes], **extra: Any) -> dict[str, Any]:
    t = start_ticks(p.pid)
    return {"pgid": p.pid, "start_ticks": t, "pid": p.pid, "pid_start_ticks": t, **extra}


def test_signal_refuses_pgid_1_and_0(helper: Helper) -> None:
    for pgid in (1, 0, -1):
        out = helper.op("signal", pgid=pgid, start_ticks=1, sig="TERM")
        assert out["state"] == "refused" and out["signalled"] is False
        assert "every process" in out["reason"]
        assert once("signal", pgid=pgid, start_ticks=1, sig="TERM")["state"] == "refused"


def test_signal_refuses_the_helpers_own_group(helper: Helper) -> None:
    pid = helper.hello["pid"]
    out = helper.op("signal", pgid=pid, start_ticks=start_ticks(pid), pid=pid, sig="TERM")
    assert out["state"] == "refused" and not out["signalled"]
    assert helper.proc.poll() is None  # still serving
    assert helper.op("inspect", pid=pid)["state"] == "refused"  # and never adopted as a server


def test_signal_leaves_a_group_whose_leader_started_at_another_time(
    helper: Helper, own_group: subprocess.Popen[bytes]
) -> None:
    wrong = identity(own_group, start_ticks=start_ticks(own_group.pid) + 1, pid_start_ticks=None)
    out = helper.op("signal", **wrong, sig="KILL")
    assert out["state"] == "mismatch" and not out["signalled"]
    time.sleep(0.2)
    assert own_group.poll() is None


def test_signal_reaches_the_proven_group(helper: Helper, own_group: subprocess.Popen[bytes]) -> None:
    assert helper.op("check", **identity(own_group))["state"] == "running"
    out = helper.op("signal", **identity(own_group), sig="TERM")
    assert out["state"] == "running" and out["signalled"] and out["members"] == [own_group.pid]
    assert own_group.wait(10) == -signal.SIGTERM


def test_signal_without_a_helper_reaches_the_proven_group(own_group: subprocess.Popen[bytes]) -> None:
    out = once("signal", **identity(own_group), sig="TERM")
    assert out["signalled"]
    assert own_group.wait(10) == -signal.SIGTERM


def test_a_group_still_exiting_after_its_leader_is_gone_not_unproven(helper: Helper) -> None:
    """A server killed as a whole leaves members a moment from exit: the check waits for them
    instead of saying the group cannot be proven (a deployment's status said "unverified")."""
    group = subprocess.Popen(["sh", "-c", "sleep 0.7 & exit 0"], start_new_session=True)
    ident = identity(group)  # read while the leader lives
    group.wait(10)  # the leader is gone (reaped); its sleep is still in the group for a moment
    assert helper.op("check", **ident)["state"] == "gone"


def test_state_files_round_trip_and_refuse_a_group_writable_one(helper: Helper, tmp_path: Path) -> None:
    d = tmp_path / "servers"
    assert helper.op("read_state", dir=str(d), name="p")["state"] == "missing"
    assert helper.op("write_state", dir=str(d), name="p", data='{"x": 1}')["state"] == "ok"
    assert helper.op("read_state", dir=str(d), name="p")["data"] == '{"x": 1}'
    (d / "p.json").chmod(0o664)
    out = helper.op("read_state", dir=str(d), name="p")
    assert out["state"] == "refused" and "writable by group" in out["reason"]


def test_one_shot_errors_are_one_clear_line() -> None:
    with pytest.raises(RemoteError, match="KeyError"):
        once("no-such-op")
    with pytest.raises(RemoteError, match="KeyError"):
        once("run", argv=["true"])  # the helper's own ops are not reachable without the helper
    with pytest.raises(RemoteError, match="exit status 127|not found"):
        once_reply("check", RunResult(exit_status=127, stderr=b"sh: python3: not found\n"))


# -- journal append ---------------------------------------------------------------------------------


def append(path: Path, data: bytes) -> int:
    return subprocess.run(
        local(python_argv("journal_append.py", str(path))), input=data, capture_output=True, timeout=60
    ).returncode


def test_journal_append_ends_a_torn_tail_and_keeps_records_whole(tmp_path: Path) -> None:
    path = tmp_path / "new" / "events.jsonl"
    assert append(path, b'{"a": 1}\n') == 0
    assert path.parent.stat().st_mode & 0o777 == 0o700 and path.stat().st_mode & 0o777 == 0o600
    with path.open("ab") as f:
        f.write(b'{"torn')  # a writer killed mid-line
    assert append(path, b'{"b": 2}\n') == 0
    first, torn, last = path.read_bytes().split(b"\n")[:3]
    assert torn == b'{"torn' and path.read_bytes().endswith(b"\n")
    me = pwd.getpwuid(os.getuid()).pw_name
    assert json.loads(first) == {"a": 1, "by": me, "uid": os.getuid()}  # the writer as the box sees it
    assert json.loads(last) == {"b": 2, "by": me, "uid": os.getuid()}


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    records = [json.dumps({"w": i, "pad": chr(97 + i) * 100_000}).encode() + b"\n" for i in range(6)]
    procs = [
        subprocess.Popen(local(python_argv("journal_append.py", str(path))), stdin=subprocess.PIPE)
        for _ in records
    ]
    for p, rec in zip(procs, records, strict=True):
        assert p.stdin is not None
        p.stdin.write(rec)
        p.stdin.close()
    assert [p.wait(60) for p in procs] == [0] * len(records)
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    for line in lines:
        del line["by"], line["uid"]
    assert sorted(lines, key=str) == sorted((json.loads(r) for r in records), key=str)


# -- shell scripts ----------------------------------------------------------------------------------


def test_read_files_script_frames_data_and_errors(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40 + b"\n@ok 0\n"  # binary, and a line that looks like framing
    (tmp_path / "f").write_bytes(data)
    paths = [str(tmp_path / "f"), str(tmp_path / "missing"), str(tmp_path)]
    r = subprocess.run(["sh", "-c", READ_FILES_SH, "sh", "5000", *paths], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = parse_read_files(paths, r.stdout)
    assert got[0].data == data[:5000]
    assert got[1].error == "ENOENT" and got[2].error == "EISDIR"


def test_launch_script_reports_the_servers_own_identity(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "server.log"
    argv = ["sh", "-c", LAUNCH_SCRIPT, "sh", str(log), str(tmp_path), LAUNCH_REPORT]
    argv += ["env", "SPECDEBUG_LAUNCH_ID=abc123", "sh", "-c", "echo started; exec sleep 300"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    started = parse_launch_report(r.stdout)
    try:
        assert started.pid == started.pgid == started.sid > 1
        assert started.start_ticks == start_ticks(started.pid)
        assert started.log_file == str(log) and started.log_offset == 0
        deadline = time.monotonic() + 30  # the report comes before the exec: wait for the server
        while b"started" not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        while Path(f"/proc/{started.pid}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":
            assert time.monotonic() < deadline, "the launched command never exec'd in the same process"
            time.sleep(0.05)
        environ = Path(f"/proc/{started.pid}/environ").read_bytes().split(b"\0")
        assert b"SPECDEBUG_LAUNCH_ID=abc123" in environ
        assert log.read_bytes() == b"started\n"
    finally:
        os.killpg(started.pgid, signal.SIGKILL)


def test_the_server_side_carries_the_launch_id_before_it_runs_the_server(tmp_path: Path) -> None:
    """The window between the report and the exec of the server: the group's leader is then the
    report's shell, whose /proc environ must already carry the launch's id (else a `status` right
    after `launch` said "unverified" on a loaded box).  A stand-in report shows that shell's own
    environ on fd 3, where the real one writes its `server` line."""
    own = 'tr "\\0" "\\n" </proc/$$/environ | grep "^SPECDEBUG_LAUNCH_ID=" >&3'
    argv = ["sh", "-c", LAUNCH_SCRIPT, "sh", str(tmp_path / "s.log"), str(tmp_path), own]
    argv += ["env", "A=1", "SPECDEBUG_LAUNCH_ID=abc123", "true"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "SPECDEBUG_LAUNCH_ID=abc123" in r.stdout.splitlines(), r.stdout
    plain = [
        "sh",
        "-c",
        LAUNCH_SCRIPT,
        "sh",
        str(tmp_path / "p.log"),
        str(tmp_path),
        own,
        "env",
        "A=1",
        "true",
    ]
    assert (
        "SPECDEBUG_LAUNCH_ID" not in subprocess.run(plain, capture_output=True, text=True, timeout=60).stdout
    )


def test_launch_script_exit_codes(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases = [(str(blocker / "x.log"), "", 3), (str(tmp_path / "a.log"), str(tmp_path / "nodir"), 4)]
    for log, cwd, code in cases:
        argv = ["sh", "-c", LAUNCH_SCRIPT, "sh", log, cwd, LAUNCH_REPORT, "true"]
        assert subprocess.run(argv, capture_output=True, timeout=60).returncode == code


def test_concurrent_record_writes_in_one_helper_all_land(helper: Helper, tmp_path: Path) -> None:
    """The helper answers requests in threads of one process: their temp files must not collide."""
    assert helper.proc.stdin is not None and helper.proc.stdout is not None
    d = str(tmp_path / "servers")
    helper.op("write_state", dir=d, name="p", data="{}")  # the folder exists before the burst
    for i in range(20):
        req = {"id": 1000 + i, "op": "write_state", "args": {"dir": d, "name": "p", "data": f'{{"n": {i}}}'}}
        helper.proc.stdin.write((json.dumps(req) + "\n").encode())
    helper.proc.stdin.flush()
    replies = [read_frame(helper.proc.stdout) for _ in range(20)]
    assert all(r["ok"] and r["result"]["state"] == "ok" for r in replies), replies
    assert sorted(os.listdir(d)) == ["p.json"]  # no temp file left behind


# -- the main process watched itself (issue 43: a kill -9 named within 0.5 s) ------------------------


def _wait_exit_after_kill(op: Any, p: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Run the wait_exit op in a thread, SIGKILL the process once the op is waiting, return its answer."""
    answer: dict[str, Any] = {}
    waiter = threading.Thread(
        target=lambda: answer.update(op(pid=p.pid, start_ticks=start_ticks(p.pid), timeout_s=30))
    )
    waiter.start()
    time.sleep(0.2)  # let the op start waiting (an op that had not would still answer, seen False)
    os.kill(p.pid, signal.SIGKILL)
    waiter.join(60)
    assert not waiter.is_alive()
    return answer


def test_wait_exit_returns_when_the_process_is_killed(
    helper: Helper, own_group: subprocess.Popen[bytes]
) -> None:
    """The helper watches the main PID itself: its answer comes when the process dies (gone), not at
    the 30 s bound (which would answer gone False); the test does not reap it (a zombie is gone)."""
    out = _wait_exit_after_kill(lambda **a: helper.op("wait_exit", **a), own_group)
    assert out["seen"] and out["gone"], out


def test_wait_exit_without_a_pidfd_reads_proc(
    own_group: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    from specdebug.box import procctl

    monkeypatch.delattr(procctl.os, "pidfd_open", raising=False)
    out = _wait_exit_after_kill(lambda **a: procctl.op_wait_exit(a), own_group)
    assert out == {"seen": True, "gone": True, "how": "proc"}


def test_wait_exit_bounds_and_identity(helper: Helper, own_group: subprocess.Popen[bytes]) -> None:
    ticks = start_ticks(own_group.pid)
    out = helper.op("wait_exit", pid=own_group.pid, start_ticks=ticks, timeout_s=0.1)
    assert out["seen"] and not out["gone"]  # alive at the bound
    # another start time: the PID is another process now; never taken for the recorded one
    assert not helper.op("wait_exit", pid=own_group.pid, start_ticks=ticks + 1, timeout_s=5)["seen"]
    assert once("wait_exit", pid=own_group.pid, start_ticks=ticks, timeout_s=0.1)["gone"] is False
