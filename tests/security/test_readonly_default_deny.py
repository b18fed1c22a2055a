"""`--readonly` is default-deny: no action of any pane, run in a read-only app, changes the box or
local trust, whether or not the pane listed it as mutating.

A writable instance launches the simulated server first (once for both modes: they only read it, and
each checks it is unchanged), so stop/restart/attach/benchmark would really change something.
Then every Binding of every pane and of the app, and every palette command, is dispatched in a
read-only app, bypassing `check_action` (the UI's list), so only the core's capability check stands
between each action and the box.  Afterwards: the server runs with the same processes, served no
request, its record on the box is byte-identical, no journal entry was written, known_hosts is
untouched.  Both read-only modes are covered: the process (`specdebug --readonly`) and the app
holding read-only remotes and journal (in-process).
Attach, in a read-only seat, observes the server the writer launched: it reaches READY without a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from textual import actions
from textual.binding import Binding

from specdebug import capability
from specdebug.capability import ReadOnlyError
from specdebug.core.control import actions as server_control
from specdebug.core.control.launch import launch
from specdebug.core.control.records import group_members, load_record
from specdebug.core.control.watch import launch_and_watch
from specdebug.core.journal import Journal
from specdebug.core.pair import session as pair
from specdebug.core.profiles import Profile
from specdebug.core.records import MarkRecord
from specdebug.remote.client import BoxClient
from specdebug.remote.factory import ConnectOptions, HostKeyPrompt, SSHOptions, connect_host
from specdebug.tui.app import ActionsProvider, SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.panes.startup import StartupPane
from specdebug.tui.widgets.seats import SeatsProvider
from tests.boxes import ssh_box
from tests.simprofiles import sim_profile
from tests.tui.pilotwait import until, until_key_screen

pytestmark = pytest.mark.slow


def requests_served(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10, trust_env=False).text
    m = re.search(r"^sglang:num_requests_total\S*\s+([0-9.e+]+)", text, re.M)
    return float(m.group(1)) if m else 0.0


def snapshot(record_path: Path, known_hosts: Path, journal_dir: Path) -> dict:
    return {
        "record": record_path.read_bytes(),
        "record_mtime": record_path.stat().st_mtime_ns,
        "known_hosts": known_hosts.read_bytes(),
        "journal": sorted(p.name for p in journal_dir.rglob("*")) if journal_dir.exists() else None,
    }


async def dispatch_everything(app: SpecdebugApp, pilot) -> list[str]:
    """Run every binding (twice: confirmations) and every palette command; returns what ran."""
    ran = []
    targets: list = [(p, p.BINDINGS) for p in app.query(Pane)] + [(app, app.BINDINGS)]
    for node, bindings in targets:
        for binding in bindings:
            if not isinstance(binding, Binding):
                continue
            name, params = actions.parse(binding.action)[1:]
            if name == "quit":
                continue  # last, below
            if isinstance(node, Pane):
                app.show_pane(node.PANE_ID)
            for _ in range(2):
                await app._dispatch_action(node, name, params)
                await pilot.pause(0.1)
                while len(app.screen_stack) > 1:
                    app.pop_screen()
                    await pilot.pause(0.05)
            ran.append(f"{getattr(node, 'PANE_ID', 'app')}.{name}")
    # the palette: every entry our providers offer (seat commands must be absent when read-only)
    provider = ActionsProvider(app.screen)
    for _text, binding, node in list(provider._entries()):
        if binding.action != "quit":
            await provider._run(node, binding)
            await pilot.pause(0.1)
            while len(app.screen_stack) > 1:
                app.pop_screen()
    assert list(SeatsProvider(app.screen)._commands()) == []
    return ran


@dataclass
class Launched:
    """The writer's server, launched once for both modes: a test only reads it (and checks that)."""

    profile: Profile
    state_dir: Path  # its records on the box
    verdict: object


def writer(sshd, state_dir: Path) -> BoxClient:
    return ssh_box(
        sshd.alias,
        ssh_config=sshd.config_path,
        keepalive_interval=1.0,
        connect_timeout=5.0,
        state_dir=str(state_dir),
    )


@pytest.fixture(scope="module")
def launched(sshd, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rodeny")
    state_dir = tmp / "servers"
    profile = sim_profile(tmp, f"rodeny-{uuid.uuid4().hex[:6]}", time_scale="0.02")

    async def on_box(action):
        remote = writer(sshd, state_dir)
        await remote.start()
        try:
            await remote.wait_connected(15)
            return await action(remote)
        finally:
            await remote.close()

    async def launch(remote):
        verdict = None
        async for ev in launch_and_watch(remote, profile):
            verdict = ev
        return verdict

    verdict = asyncio.run(on_box(launch))
    try:
        yield Launched(profile, state_dir, verdict)
    finally:
        asyncio.run(on_box(lambda remote: server_control.stop(remote, profile, grace_s=3)))
        (state_dir / f"{profile.name}.json").unlink(missing_ok=True)


@pytest.mark.parametrize("mode", ["process", "app"])
async def test_no_action_mutates_in_readonly(
    mode: str, sshd, launched: Launched, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("SPECDEBUG_STATE_DIR", str(launched.state_dir))  # the read-only seat's remote too
    profile = launched.profile
    record_path = launched.state_dir / f"{profile.name}.json"
    verdict = launched.verdict
    remote = writer(sshd, launched.state_dir)
    await remote.start()
    try:
        await remote.wait_connected(15)
        assert verdict is not None and verdict.verdict == "ready", verdict
        record = await load_record(remote, profile.name)
        pids_before = sorted(p.pid for p in group_members(await remote.processes(), record))
        served_before = requests_served(profile.server.port)
        journal_dir = tmp_path / "ro-session"
        before = snapshot(record_path, sshd.known_hosts, journal_dir)

        ro_remote = ssh_box(sshd.alias, ssh_config=sshd.config_path, keepalive_interval=1.0)
        journal = Journal(journal_dir)
        ctx = AppContext(
            remotes={sshd.alias: ro_remote},
            selected=sshd.alias,
            profile=profile,
            journal=journal,
            readonly=True,
        )
        block = capability.readonly_process() if mode == "process" else contextlib.nullcontext()
        with block:
            app = SpecdebugApp(ctx)
            notes: list[str] = []
            notify = app.notify

            def record(message, **kw):
                notes.append(str(message))
                return notify(message, **kw)

            app.notify = record  # toasts expire; keep every message
            async with app.run_test(size=(160, 45)) as pilot:
                await ro_remote.wait_connected(30)
                ran = await dispatch_everything(app, pilot)
                # workers the actions started run to their end (or refusal): waited for, not slept for
                # (3 s of pause missed the benchmark's refusal beside 8 busy loops).  The launch is
                # refused before any box call: it waited for the GPU-neighbour check's box calls,
                # which took over 20 s once beside 8 busy loops, and the refusal missed 60 s
                for word in ("launch", "benchmark"):
                    await until(pilot, lambda w=word: any(w in n and "read-only" in n for n in notes))
                # attach in a read-only seat observes the driver's server: same phases, health, no write
                observer = app.query_one(StartupPane)
                await until(pilot, lambda: observer.state == "ready")
                assert observer.state == "ready", notes
                await app._dispatch_action(app, "quit", ())
        assert {"startup.launch", "startup.stop", "startup.restart", "startup.attach", "bench.run"} <= set(
            ran
        )
        assert {"logs.mark", "bench.baseline", "env.mark"} <= set(ran)
        # the core refused them (the UI's list was bypassed)
        refused = [n for n in notes if "read-only" in n]
        assert any("launch" in n for n in refused), notes
        assert any("benchmark" in n for n in refused), "\n".join(notes)
        assert not any("attach" in n for n in refused), notes

        after = snapshot(record_path, sshd.known_hosts, journal_dir)
        assert after == before
        record = await load_record(remote, profile.name)
        assert sorted(p.pid for p in group_members(await remote.processes(), record)) == pids_before
        assert requests_served(profile.server.port) == served_before
        assert not (journal_dir / "events.jsonl").exists()
    finally:
        await remote.close()


def test_core_sinks_refuse_in_a_readonly_process(tmp_path: Path) -> None:
    """Each sink on its own, with no UI at all: the process flag is enough."""
    from specdebug.transport.ssh import hostkeys

    with capability.readonly_process():
        with pytest.raises(ReadOnlyError):
            Journal(tmp_path / "s").append(MarkRecord(label="x"))
        with pytest.raises(ReadOnlyError):
            hostkeys.save_key(None, tmp_path / "known_hosts")  # type: ignore[arg-type]
        with pytest.raises(ReadOnlyError):
            pair.grant(str(tmp_path / "sock"), "nobody", pair.Mode.RW)
        for coro in (
            launch(object(), object()),  # type: ignore[arg-type]
            server_control.attach(object(), object()),  # type: ignore[arg-type]
        ):
            with pytest.raises(ReadOnlyError):
                asyncio.run(coro)
    assert not (tmp_path / "s").exists() and not (tmp_path / "known_hosts").exists()


async def test_unknown_host_key_is_not_saved_from_a_readonly_app(sshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    config = sshd.write_client_config(tmp_path / "ssh_config", known)
    prompt = HostKeyPrompt()  # the app's key screen decides, as `specdebug HOST` wires it
    ro_remote = connect_host(
        sshd.alias, ConnectOptions(ssh=SSHOptions(ssh_config=config, on_host_key=prompt))
    )
    ctx = AppContext(
        remotes={sshd.alias: ro_remote}, selected=sshd.alias, readonly=True, host_key_prompt=prompt
    )
    with capability.readonly_process():
        app = SpecdebugApp(ctx)
        async with app.run_test(size=(140, 40)) as pilot:
            # waited for with a deadline, not a count of pauses (10 s of pauses failed beside 8 busy loops;
            # 60 s once, right after another test of this worker saw its box calls take over 20 s): the
            # key is asked after two connections (the refused one, then the key's own), each an sshd
            # start on the loaded machine.  A bound, not an expected time; a failure says where it was.
            await until_key_screen(pilot, app, ro_remote)
            await pilot.press("s")  # accept and save
            saved = await until(pilot, lambda: "read-only" in (ro_remote.status.last_error or ""))
            assert saved, f"{ro_remote.status}; screens {[type(s).__name__ for s in app.screen_stack]}"
            await app._dispatch_action(app, "quit", ())
    assert known.read_text() == ""
