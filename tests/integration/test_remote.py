"""The remote layer against a real OpenSSH sshd on loopback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdebug.remote.api import ConnState, HostKeyRefused
from specdebug.remote.factory import accept_and_save_keys
from tests import clifork
from tests.boxes import ssh_box
from tests.sshd_harness import start_sshd


def specdebug(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_probe_by_alias_through_F(sshd):
    r = specdebug("probe", "-F", str(sshd.config_path), "gpubox", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    for key in [
        "host",
        "connected",
        "hostname",
        "kernel",
        "cpus",
        "mem_total_bytes",
        "load",
        "uptime_s",
        "gpus",
        "gpu_error",
        "rtt_ms",
    ]:
        assert key in info
    assert info["connected"] is True and info["hostname"]
    assert len(info["load"]) == 3 and info["cpus"] >= 1
    assert len(info["gpus"]) == 4  # the fake nvidia-smi
    assert info["gpus"][2]["throttle_reasons"] == ["sw_thermal_slowdown"]
    assert info["gpus"][3]["power_draw_w"] is None  # [N/A]


def test_unknown_host_key_refused_then_accepted_with_flag(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    cfg = sshd.write_client_config(tmp_path / "ssh_config", kh)
    r = specdebug("probe", "-F", str(cfg), "gpubox", "--json")
    assert r.returncode == 1
    assert "unknown host key" in r.stderr and "SHA256:" in r.stderr and "gpubox" in r.stderr
    assert not kh.exists() or kh.read_text() == ""
    r = specdebug("probe", "-F", str(cfg), "gpubox", "--json", "--accept-new-host-key")
    assert r.returncode == 0, r.stderr
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519" in kh.read_text()
    r = specdebug("probe", "-F", str(cfg), "gpubox", "--json")  # saved: no flag needed now
    assert r.returncode == 0, r.stderr


async def test_changed_host_key_refused_and_nothing_runs(sshd, tmp_path):
    other = tmp_path / "otherkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} " + " ".join(Path(f"{other}.pub").read_text().split()[:2]) + "\n")
    cfg = sshd.write_client_config(tmp_path / "ssh_config", kh)
    r = specdebug("probe", "-F", str(cfg), "gpubox", "--accept-new-host-key")
    assert r.returncode == 1
    assert "HOST KEY CHANGED" in r.stderr and "SHA256:" in r.stderr
    marker = tmp_path / "ran"
    remote = ssh_box("gpubox", ssh_config=cfg, on_host_key=accept_and_save_keys)
    await remote.start()
    with pytest.raises(HostKeyRefused) as info:
        await remote.wait_connected(10)
        await remote.run(["touch", str(marker)])
    assert info.value.changed
    assert remote.status.state is ConnState.FAILED
    await remote.close()
    assert not marker.exists()
    assert kh.read_text().count("\n") == 1  # the flag never overrides a changed key


async def test_reconnects_after_server_side_killed(sshd, remote):
    states = []
    remote.subscribe(lambda st: states.append(st.state))
    assert (await remote.run(["true"])).ok
    assert sshd.kill_sessions() >= 1
    deadline = time.monotonic() + 60
    while ConnState.RECONNECTING not in states and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert ConnState.RECONNECTING in states
    await remote.wait_connected(20)
    res = await remote.run(["cat", "/proc/loadavg"])
    assert res.ok and len(res.out.split()) == 5
    assert states[-1] is ConnState.CONNECTED


def _still_there(pid: int, arg: str) -> bool:
    """Is the remote command this test started (its shell reported the PID) still alive?  The tag
    argument guards against a reused PID; the box is this machine."""
    try:
        return arg.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


async def test_cancelled_stream_leaves_no_remote_process(remote):
    tag = f"{time.time():.6f}"  # unique sleep argument
    arg = f"1000.{tag.replace('.', '')}"
    stream = remote.stream(["sh", "-c", 'echo started $$; exec sleep "$1"', "sh", arg])
    async for line in stream:
        word, pid = line.split()
        assert word == "started"
        break  # leaving the loop closes the stream
    await stream.aclose()
    deadline = time.monotonic() + 60
    while _still_there(int(pid), arg) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _still_there(int(pid), arg)


async def test_task_cancel_ends_remote_stream(remote):
    arg = f"999.{int(time.time() * 1e6)}"
    pids: list[int] = []

    async def consume():
        async for line in remote.stream(["sh", "-c", 'echo go $$; exec sleep "$1"', "sh", arg]):
            pids.append(int(line.split()[1]))

    task = asyncio.create_task(consume())
    deadline = time.monotonic() + 60
    while not (pids and _still_there(pids[0], arg)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert pids and _still_there(pids[0], arg)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 60
    while _still_there(pids[0], arg) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _still_there(pids[0], arg)


async def test_max_sessions_2_ten_streams_complete(sshd, tmp_path):  # sshd: skip without OpenSSH
    server = start_sshd(tmp_path / "sshd2", max_sessions=2)
    remote = ssh_box("gpubox", ssh_config=server.config_path)
    try:
        await remote.start()
        await remote.wait_connected(10)

        async def one(i: int) -> list[str]:
            return [line async for line in remote.stream(["sh", "-c", f"sleep 0.2; echo done{i}"])]

        results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(10))), 60)
        assert results == [[f"done{i}"] for i in range(10)]
        assert (await remote.run(["true"])).ok  # the probe channel kept its slot
    finally:
        await remote.close()
        server.stop()


async def test_stream_exit_status_and_stderr_merge(remote):
    stream = remote.stream(["sh", "-c", "echo out; echo err >&2; exit 7"], stderr=True)
    lines = [line async for line in stream]
    assert sorted(lines) == ["err", "out"]
    assert stream.exit_status == 7


async def test_invalid_utf8_does_not_kill_connection(remote):
    res = await remote.run(["printf", "\\377\\376ok"])
    assert res.stdout == b"\xff\xfeok"
    lines = [line async for line in remote.stream(["printf", "a\\377b\\n"])]
    assert lines == ["a\ufffdb"]
    assert (await remote.run(["true"])).ok


async def test_request_timeout_keeps_channel(remote):
    res = await remote.run(["sleep", "5"], timeout=0.3)
    assert res.timed_out and res.exit_status is None
    assert (await remote.run(["echo", "still"])).out == "still\n"


async def test_overlapping_requests(remote):
    """Eight commands meet at a barrier on the box: each marks itself arrived and waits until all eight
    have, so they pass only if they run at once, not queued behind each other (no clock involved)."""
    folder = (await remote.run(["mktemp", "-d"])).out.strip()
    barrier = 'touch "$0/$1"; n=0; while [ "$(ls "$0" | wc -l)" -lt 8 ]; do sleep 0.05; n=$((n+1)); '
    barrier += '[ "$n" -gt 1200 ] && exit 3; done; echo "$1"'
    try:
        results = await asyncio.gather(*(remote.run(["sh", "-c", barrier, folder, str(i)]) for i in range(8)))
    finally:
        await remote.run(["rm", "-rf", "--", folder])
    assert [(r.exit_status, r.out.strip()) for r in results] == [(0, str(i)) for i in range(8)]


async def test_read_files_one_failure_does_not_hide_rest(remote, tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"abc")
    got = await remote.read_files([str(f), str(tmp_path / "missing"), "/proc/loadavg"])
    assert got[0].data == b"abc"
    assert got[1].error == "ENOENT"
    assert got[2].data  # /proc files report size 0 but are read fully


async def test_forward_local_port(remote):
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    fwd = await remote.forward_local_port(port)
    reader, writer = await asyncio.open_connection("127.0.0.1", fwd.local_port)
    conn, _ = await asyncio.get_running_loop().run_in_executor(None, srv.accept)
    conn.sendall(b"hello")
    assert await reader.readexactly(5) == b"hello"
    writer.close()
    conn.close()
    srv.close()
    await fwd.close()


hostile = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=0, max_size=40
) | st.sampled_from(
    ["$(touch /tmp/pwned)", "`id`", "a;b", "x\ny", "*", "'", '"', "\\", "$HOME", "-n", "--", "~"]
)


@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.lists(hostile, min_size=1, max_size=5), min_size=25, max_size=25))
def test_hostile_arguments_arrive_byte_for_byte(sshd, batch):
    """25 hostile argument lists per connection mode: one connection per mode, not one per list."""

    async def check():
        for use_helper in (True, False):
            r = ssh_box("gpubox", ssh_config=sshd.config_path, use_helper=use_helper)
            try:
                await r.wait_connected(15)
                for args in batch:
                    want = b"".join(a.encode() + b"\0" for a in args)
                    res = await r.run(["printf", "%s\\0", *args])
                    assert res.stdout == want
                    lines = [ln async for ln in r.stream(["printf", "%s\\0", *args], binary=True)]
                    assert b"".join(lines) == want
            finally:
                await r.close()

    asyncio.run(check())
    assert not Path("/tmp/pwned").exists()


def test_ignored_ssh_options_warned_once_and_keys_still_verified(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    cfg = sshd.write_client_config(
        tmp_path / "ssh_config",
        kh,
        StrictHostKeyChecking="no",
        ControlMaster="auto",
        LocalForward="8000 127.0.0.1:8000",
    )
    r = specdebug("probe", "-F", str(cfg), "gpubox", "--json")
    assert r.returncode == 1  # StrictHostKeyChecking=no does not switch verification off
    assert r.stderr.count("StrictHostKeyChecking is ignored") == 1
    assert "ControlMaster is ignored" in r.stderr and "LocalForward is ignored" in r.stderr
    assert "unknown host key" in r.stderr


async def test_forward_survives_reconnect_on_same_local_port(sshd, remote):
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(10)
    fwd = await remote.forward_local_port(srv.getsockname()[1])
    local = fwd.local_port
    sshd.kill_sessions()
    await asyncio.sleep(0.3)
    await remote.wait_connected(20)
    deadline = time.monotonic() + 60
    while True:  # the listener is rebound right after the reconnect
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", local)
            break
        except OSError:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
    conn, _ = await asyncio.get_running_loop().run_in_executor(None, srv.accept)
    conn.sendall(b"again")
    assert await asyncio.wait_for(reader.readexactly(5), 10) == b"again"
    assert fwd.local_port == local
    writer.close()
    conn.close()
    srv.close()
    await fwd.close()
