"""In a `box:NAME` session the watcher's Startup pane follows what other seats write to the
journal (issue 26): the driver's stop shows as a stop by the driver, not "crashed or killed outside
specdebug", and a relaunch is picked up without pressing `a`."""

from __future__ import annotations

from specdebug.core.control.events import ServerState
from specdebug.core.profiles import Profile
from specdebug.core.records import parse_record
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.panes.startup import StartupPane
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import until

PROFILE = Profile.model_validate(
    {"name": "base", "server": {"argv": ["true"], "kind": "sglang", "port": 30000}}
)


async def test_the_drivers_stop_and_relaunch_reach_the_watchers_startup_pane() -> None:
    ctx = AppContext(remotes={"box": StillRemote("box")}, selected="box", profile=PROFILE, readonly=True)
    app = SpecdebugApp(ctx, panes=[StartupPane])
    async with app.run_test(size=(140, 40)) as pilot:
        pane = app.query_one(StartupPane)
        pane.mon.state = ServerState.READY  # the watcher saw the driver's server up
        stop = {
            "kind": "stop",
            "profile": "base",
            "stopped": True,
            "was_running": True,
            "by": "alice",
            "message": "stopped (SIGTERM)",
            "eid": "e1",
            "ts": 1.0,
        }
        other = {**stop, "profile": "someone-else", "by": "bob", "eid": "e2"}
        app.post_message(
            Pane.JournalChanged([parse_record(other), parse_record(stop)])
        )  # as the journal follower posts it
        await until(pilot, lambda: pane.state is ServerState.STOPPED, 30)
        assert pane.state is ServerState.STOPPED
        assert "stopped by alice" in pane.message and "crashed" not in pane.message
        assert "stopped by alice" in pane.verdict_text().plain or "stopped by alice" in pane.head_text().plain

        launch = {"kind": "launch", "profile": "base", "pid": 4242, "pgid": 4242, "port": 30000}
        launch |= {"log_file": "/l", "by": "alice", "eid": "e3", "ts": 2.0}
        app.post_message(Pane.JournalChanged([parse_record(launch)]))
        await until(pilot, lambda: pane.state is ServerState.CHECKING, 30)
        assert pane.state is ServerState.CHECKING  # asking the box what runs now: no `a` needed
