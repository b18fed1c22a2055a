"""Hosts pane: live against the real sshd (Pilot), and a snapshot with fixed data."""

from __future__ import annotations

from textual.widgets import DataTable

from specdebug.remote.api import ConnState, ConnStatus
from specdebug.remote.factory import ConnectOptions, HostKeyPrompt, SSHOptions, connect_host
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.hosts import HostsPane
from specdebug.tui.screens.help import HelpScreen
from tests.boxes import ssh_box
from tests.tui.fakes import StillRemote, sample_host_info
from tests.tui.pilotwait import toasts, until, until_key_screen


async def test_hosts_pane_shows_connected_host_and_gpus(sshd):
    remote = ssh_box("gpubox", ssh_config=sshd.config_path)
    app = SpecdebugApp(AppContext(remotes={"gpubox": remote}, selected="gpubox"))
    async with app.run_test(size=(140, 40)) as pilot:
        pane = app.query_one(HostsPane)
        table = app.query_one("#hosts-table", DataTable)
        gpus = app.query_one("#gpu-table", DataTable)

        # the table takes the hosts' news in batches (hosts.BATCH_S): wait for what it shows
        def shown() -> bool:
            return (
                "gpubox" in pane.infos and str(table.get_cell("gpubox", "gpus")) != "" and gpus.row_count > 0
            )

        assert await until(pilot, shown, 60.0), "condition not reached"
        row = [str(c) for c in table.get_row("gpubox")]
        assert row[1].startswith("connected")
        assert row[3] == pane.infos["gpubox"].hostname and row[2].startswith("4")  # gpus after the state
        assert app.query_one("#gpu-table", DataTable).row_count == 4


def _asking_remote(cfg):
    """A connection whose host-key decision is the app's key screen (as `specdebug HOST` builds it)."""
    prompt = HostKeyPrompt()
    return connect_host("gpubox", ConnectOptions(ssh=SSHOptions(ssh_config=cfg, on_host_key=prompt))), prompt


async def test_unknown_host_key_modal_accept_and_save(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    cfg = sshd.write_client_config(tmp_path / "ssh_config", kh)
    remote, prompt = _asking_remote(cfg)
    app = SpecdebugApp(AppContext(remotes={"gpubox": remote}, selected="gpubox", host_key_prompt=prompt))
    async with app.run_test(size=(140, 40)) as pilot:
        await until_key_screen(pilot, app, remote)
        assert "SHA256:" in app.screen.info.fingerprint
        await pilot.press("s")
        assert await until(pilot, lambda: remote.status.state is ConnState.CONNECTED, 60.0), (
            "condition not reached"
        )
    assert f"[127.0.0.1]:{sshd.port}" in kh.read_text()


async def test_readonly_and_worker_errors_never_crash():
    app = SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, readonly=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("escape")
        assert app.is_running


def _snapshot_app() -> SpecdebugApp:
    remotes = {
        "gpubox": StillRemote("gpubox"),
        "spare": StillRemote(
            "spare", ConnStatus(ConnState.RECONNECTING, attempt=3, last_error="connection refused")
        ),
    }
    return SpecdebugApp(AppContext(remotes=remotes, selected="gpubox"), panes=[HostsPane])


def test_hosts_pane_snapshot(snap_compare):
    async def feed(pilot):
        pane = pilot.app.query_one(HostsPane)
        pane.show_info(sample_host_info("gpubox"), ConnStatus(ConnState.CONNECTED, rtt_ms=1.2))
        await pilot.pause()

    assert snap_compare(_snapshot_app(), run_before=feed, terminal_size=(130, 32))


async def test_silent_host_never_blocks_the_ui_or_the_other_host(sshd):
    """A box that accepts TCP and never speaks (a hung sshd) stays in its own row."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    port = silent.getsockname()[1]
    slow = ssh_box(f"nobody@127.0.0.1:{port}", connect_timeout=1.0)
    good = ssh_box("gpubox", ssh_config=sshd.config_path)
    app = SpecdebugApp(
        AppContext(remotes={"slow": slow, "gpubox": good}, selected="gpubox"), panes=[HostsPane]
    )
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            pane = app.query_one(HostsPane)
            assert await until(pilot, lambda: "gpubox" in pane.infos, 60.0), "condition not reached"
            assert await until(
                pilot,
                lambda: slow.status.state is ConnState.RECONNECTING and bool(slow.status.last_error),
                60.0,
            ), "condition not reached"
            assert "timed out" in slow.status.last_error
            await pilot.press("question_mark")  # the UI still answers keys
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
    finally:
        silent.close()


async def test_refused_key_can_be_retried_from_the_hosts_pane(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    cfg = sshd.write_client_config(tmp_path / "ssh_config", kh, StrictHostKeyChecking="no")
    remote, prompt = _asking_remote(cfg)
    ctx = AppContext(remotes={"gpubox": remote}, selected="gpubox", host_key_prompt=prompt)
    app = SpecdebugApp(ctx, panes=[HostsPane])
    async with app.run_test(size=(140, 40)) as pilot:
        # the ignored ssh option is said in the TUI, not lost behind the screen
        assert any("StrictHostKeyChecking" in m for m in toasts(app)), toasts(app)
        await until_key_screen(pilot, app, remote)
        await pilot.press("r")  # refuse
        assert await until(pilot, lambda: remote.status.state is ConnState.FAILED, 60.0), (
            "condition not reached"
        )
        await pilot.press("r")  # refresh the hosts pane: asks again
        await until_key_screen(pilot, app, remote)
        await pilot.press("o")  # accept once: nothing saved
        assert await until(pilot, lambda: remote.status.state is ConnState.CONNECTED, 60.0), (
            "condition not reached"
        )
    assert not kh.exists() or kh.read_text() == ""


async def test_authentication_failure_points_at_the_servers_auth_log():
    from specdebug.remote.api import ConnState, ConnStatus
    from specdebug.tui.app import SpecdebugApp
    from specdebug.tui.context import AppContext
    from specdebug.tui.panes.hosts import HostsPane
    from tests.tui.fakes import StillRemote

    app = SpecdebugApp(AppContext(remotes={"gpubox": StillRemote("gpubox")}), panes=[HostsPane])
    async with app.run_test(size=(140, 30)) as pilot:
        pane = app.query_one(HostsPane)
        failed = ConnStatus(ConnState.FAILED, last_error="gpubox: authentication failed (Permission denied)")
        for _ in range(2):  # said once, not at every status
            pane.post_message(HostsPane.StatusChanged("gpubox", failed))
            await pilot.pause()
        assert await until(pilot, lambda: any("auth log" in m for m in toasts(app))), toasts(app)
        await pilot.pause()
        told = [m for m in toasts(app) if "auth log" in m]
        assert told == [
            "gpubox: " + "authentication failed: check the key and user, and the server's auth log "
            "(a locked account looks the same from here)"
        ]


async def test_at_80_columns_the_hosts_row_keeps_its_gpus():
    """Issue 26: at 80x24 the hosts row lost its GPU column (the last one): it comes after the state."""
    from tests.tui.fakes import sample_host_info

    app = _snapshot_app()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(HostsPane)
        pane.show_info(sample_host_info("gpubox"), ConnStatus(ConnState.CONNECTED, rtt_ms=1.2))
        table = pane.query_one("#hosts-table", DataTable)

        def shown() -> list[str]:
            return [str(table.render_line(y).text) for y in range(3)]

        # a frame drawn before the table measured the new cells (a loaded machine's timing) is not
        # what stays on screen (Textual #3533: it was, GPUs cut to "...(1", until a cell changed)
        shown()
        assert await until(pilot, lambda: any("8 (1 throttled)" in line for line in shown())), shown()


async def test_the_gpu_table_keeps_full_names_when_a_frame_comes_before_its_measure():
    """A full run saw the GPU table stuck at its header's widths ("NVID", "1980/198") for as long as
    the GPU facts stayed the same: its rows were drawn before the table measured them and kept from
    that cache (Textual #3533, fixed for the hosts table only).  Every table is a MeasuredTable now."""
    from specdebug.tui.widgets.measured_table import MeasuredTable

    app = _snapshot_app()
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(HostsPane)
        table = pane.query_one("#gpu-table", DataTable)
        pane.show_info(sample_host_info("gpubox"), ConnStatus(ConnState.CONNECTED, rtt_ms=1.2))

        def shown() -> list[str]:
            return [str(table.render_line(y).text) for y in range(3)]

        shown()  # a frame drawn before the table's idle (a loaded machine's timing)
        assert await until(pilot, lambda: any("NVIDIA H200" in line for line in shown())), shown()
        assert all(isinstance(t, MeasuredTable) for t in app.query(DataTable))
