"""The box client over LocalTransport: this machine as the box, the same helper, fallback and streams
as over SSH (no sshd), and host addresses choosing their transport by scheme."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

from specdebug.remote.api import ConnectionDropped, ConnState, HostSpecError, RemoteError
from specdebug.remote.client import BoxClient, StepBoxClient
from specdebug.remote.factory import connect_host
from specdebug.transport.address import parse_address, transport_for
from specdebug.transport.base import StepTransport
from specdebug.transport.local import LocalProcess, LocalTransport
from specdebug.transport.slurm.transport import SlurmTransport
from specdebug.transport.ssh.transport import SSHTransport
from tests.boxes import local_box


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_helper_runs_here_and_ends_with_the_client(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    box = local_box("here")
    try:
        await box.wait_connected(30)
        assert box.status.state is ConnState.CONNECTED and box.has_helper
        helper = box.helper_info["pid"]
        res = await box.run(["sh", "-c", 'echo "$1"; echo err >&2; exit 3', "sh", "a b"], cwd=str(tmp_path))
        assert (res.exit_status, res.out, res.err) == (3, "a b\n", "err\n")
        files = await box.read_files([str(tmp_path / "a.txt"), str(tmp_path / "none")])
        assert files[0].data == b"hello" and files[1].error == "ENOENT"
        procs = await box.processes(pids=[os.getpid()])
        assert any(p.pid == os.getpid() for p in procs)
        async with box.stream(["sh", "-c", "echo one; echo two >&2; exec sleep 60"], stderr=True) as stream:
            got = []
            async for line in stream:
                got.append(line)
                if len(got) == 2:
                    break
        assert sorted(got) == ["one", "two"]
        fwd = await box.forward_local_port(4321)
        assert fwd.local_port == 4321  # this machine's port: no tunnel
        with pytest.raises(RemoteError, match="no forward"):
            await box.forward_local_port(80, "10.0.0.5")
    finally:
        await box.close()
    assert box.status.state is ConnState.CLOSED
    deadline = time.monotonic() + 30  # a bound under load, not an expected time
    while alive(helper) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not alive(helper)  # closing the client ended the helper it started


async def test_without_a_helper_each_request_is_one_process(tmp_path) -> None:
    box = local_box(use_helper=False)
    try:
        res = await box.run(["cat"], input=b"in put")
        assert res.ok and res.out == "in put"
        slow = await box.run(["sh", "-c", "cat >/dev/null; sleep 60"], input=b"x", timeout=0.5)
        assert slow.timed_out and slow.exit_status is None
        assert (await box.read_file(__file__))[:3] == b'"""'
        answer = await box.box_op("port_holder", {"port": 1})
        assert isinstance(answer, dict)
        with pytest.raises(RemoteError, match="needs python3"):
            await box.processes()
    finally:
        await box.close()


async def test_a_dropped_link_ends_streams_and_reconnects() -> None:
    box = local_box(use_helper=False)
    try:
        await box.wait_connected(10)
        stream = box.stream(["sh", "-c", "echo up; exec sleep 60"])
        lines = stream.__aiter__()
        assert await lines.__anext__() == "up"
        box.drop_connection()
        with pytest.raises(ConnectionDropped):
            await lines.__anext__()
        deadline = time.monotonic() + 30  # a bound under load, not an expected time
        while not (box.generation == 2 and box.status.state is ConnState.CONNECTED):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        assert box.generation == 2
        assert (await box.run(["true"])).ok
    finally:
        await box.close()


def test_addresses_pick_their_transport() -> None:
    assert parse_address("gpubox").scheme == "ssh"
    assert parse_address("ssh://gpubox").target == "gpubox"
    assert parse_address("user@10.0.0.1:2222").scheme == "ssh"
    assert parse_address("local:22").scheme == "ssh"  # a host named local, port 22
    assert parse_address("slurm:12:n1").scheme == "slurm"
    assert parse_address("local:").scheme == "local"
    with pytest.raises(HostSpecError, match="k8s: transport is not there yet"):
        parse_address("k8s:pod/x")
    with pytest.raises(HostSpecError):
        parse_address("ssh://")
    ssh = transport_for("ssh://gpubox")
    assert isinstance(ssh, SSHTransport) and ssh.name == "ssh://gpubox" and ssh.spec.host == "gpubox"
    assert isinstance(transport_for("local:"), LocalTransport)
    slurm = transport_for("slurm:12:n1")
    assert isinstance(slurm, SlurmTransport) and isinstance(slurm, StepTransport)
    assert not isinstance(transport_for("local:"), StepTransport)


def test_the_factory_puts_one_box_client_over_each() -> None:
    assert type(connect_host("local:")) is BoxClient
    assert type(connect_host("ssh://gpubox")) is BoxClient
    assert isinstance(connect_host("slurm:12"), StepBoxClient)


async def test_local_processes_get_their_own_session() -> None:
    """The watchdog's `kill 0` ends the command's group, never the test's."""
    box = local_box(use_helper=False)
    try:
        res = await box.run([sys.executable, "-c", "import os; print(os.getsid(0))"])
        assert int(res.out) != os.getsid(0)
    finally:
        await box.close()


async def test_a_new_generation_is_counted_with_connected(monkeypatch) -> None:
    """The first RTT is measured before "connected" is said; the generation counted before it let a
    watcher see a new connection while the status still said reconnecting (a Slurm test, loaded)."""
    from specdebug.remote.session import Session

    measure = Session._measure_rtt

    async def slow_rtt(self):  # a loaded box: the first ping takes a while
        await asyncio.sleep(0.3)
        return await measure(self)

    monkeypatch.setattr(Session, "_measure_rtt", slow_rtt)
    box = local_box(use_helper=False)
    seen: list[tuple[int, ConnState]] = []
    try:
        await box.start()
        for _ in range(300):
            seen.append((box.generation, box.status.state))
            if box.generation:
                break
            await asyncio.sleep(0.01)
        assert all(state is ConnState.CONNECTED for gen, state in seen if gen), seen
        assert box.generation == 1
    finally:
        await box.close()


def run_collecting_unraisable(main: Coroutine[Any, Any, None]) -> list[str]:
    """asyncio.run(main), then a garbage collection: what Python reported as unraisable meanwhile
    (a transport collected after its loop closed says "Event loop is closed" there).

    Garbage that earlier tests of this worker left is collected first: collected in our window, a
    transport of theirs would be counted as ours (it failed CI once so)."""
    import gc

    gc.collect()
    unraisable: list[str] = []
    before = sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value} in {u.object!r}")
    try:
        asyncio.run(main)
        gc.collect()
    finally:
        sys.unraisablehook = before
    return unraisable


def test_a_stream_closed_before_its_output_ended_leaves_no_transport_behind() -> None:
    """A reader that stops early leaves output unread (the pipe's reading paused at the buffer's
    limit), so asyncio never saw EOF and kept the subprocess transport open; garbage-collected after
    its loop closed it said "Event loop is closed" (2-4 unraisable warnings a full run)."""

    async def stream_and_stop() -> None:
        transport = LocalTransport("here")
        await transport.connect()
        proc = await transport.exec(["sh", "-c", "yes specdebug | head -c 4000000; exec sleep 60"])
        await proc.stdout.readline()  # one line of ~4 MB: reading pauses with the rest unread
        await proc.wait_closed(1.0)
        await transport.close()

    assert run_collecting_unraisable(stream_and_stop()) == []


STUBBORN = ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"]  # ignores EOF and TERM


def assert_ended_with_its_loop(leave: Callable[[LocalProcess], Awaitable[None]]) -> None:
    """A command that ignores EOF and TERM, given up by `leave` just before its loop ends (within
    its EOF grace): no unraisable warning, its transport closed while the loop ran (its collection
    later says nothing), and its group killed, not left to finish its grace after the loop (reaped
    by asyncio's waitpid thread: a loaded machine takes a moment)."""
    pids: list[int] = []
    transports: list[asyncio.BaseTransport] = []

    async def run() -> None:
        transport = LocalTransport("here")
        await transport.connect()
        proc = await transport.exec(STUBBORN)
        assert isinstance(proc, LocalProcess)
        pids.append(proc.proc.pid)
        transports.append(proc.proc._transport)  # type: ignore[attr-defined]
        await leave(proc)

    assert run_collecting_unraisable(run()) == []
    assert transports[0].is_closing()
    deadline = time.monotonic() + 60
    while _group_alive(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(pids[0])


def test_a_close_given_up_ends_the_process_and_its_transport_at_once() -> None:
    """A follower cancelled while its stream closes (the app leaving): the process is still within
    its EOF grace, and the loop closes next; it is ended then, and no transport outlives the loop."""

    async def give_up(proc: LocalProcess) -> None:
        waiting = asyncio.ensure_future(proc.wait_closed(1.0))
        await asyncio.sleep(0.2)  # EOF sent; the shell ignores it and TERM: it has seconds of grace left
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    assert_ended_with_its_loop(give_up)


def test_a_command_closed_as_its_loop_ends_is_killed_with_its_transport() -> None:
    """A one-shot command whose caller is cancelled (a pane's follower as the app leaves) is closed
    without a wait: its EOF grace was still running when the loop closed, so nothing was signalled,
    the process outlived the loop and its transport said "Event loop is closed" when collected."""

    async def close_and_leave(proc: LocalProcess) -> None:
        proc.close()
        await asyncio.sleep(0.2)  # the loop ends within the command's EOF grace

    assert_ended_with_its_loop(close_and_leave)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_direct_forward_is_reached_at_the_boxs_own_address() -> None:
    """A server bound to 127.0.0.3 (a loopback node's --host) is reached there, not at 127.0.0.1."""
    from specdebug.transport.local import LocalTransport

    fwd = await LocalTransport().forward(4321, "127.0.0.3")
    assert fwd is not None and (fwd.local_host, fwd.local_port) == ("127.0.0.3", 4321)
