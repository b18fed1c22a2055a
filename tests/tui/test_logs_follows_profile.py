"""After `P` picks another profile, the Logs pane shows the new profile's server, never the old one's
numbers under the new name (issue 26): the whole app, the pick going through the app's store."""

from __future__ import annotations

from pathlib import Path

from specdebug.core.profiles import Profile
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.logs import LogsPane
from tests.tui.pilotwait import until
from tests.tui.test_logs_pane import READY, decode
from tests.unit.test_log_follow_local import LocalRemote


def profile(name: str, log: Path) -> Profile:
    return Profile.model_validate(
        {"name": name, "server": {"argv": ["true"], "kind": "sglang", "log_file": str(log)}}
    )


async def wait_for(pilot, cond, timeout_s: float = 60.0) -> None:
    """A deadline, not a count of turns: 300 turns of 0.02 s passed before a loaded machine's follow."""
    if not await until(pilot, cond, timeout_s):
        raise AssertionError("condition never held")


async def test_picking_another_profile_follows_its_log(tmp_path: Path) -> None:
    logs = {}
    for name, al in (("base", 2.0), ("spec3", 3.5)):
        logs[name] = tmp_path / f"{name}.log"
        logs[name].write_text(READY + "\n" + decode(12, al, 10.0) + "\n")
    remote = LocalRemote()
    remote.name = "box"
    remote.state_dir = str(tmp_path / "servers")  # no records: each log from its start
    ctx = AppContext(remotes={"box": remote}, selected="box", profile=profile("base", logs["base"]))
    app = SpecdebugApp(ctx, panes=[LogsPane])
    async with app.run_test(size=(160, 30)) as pilot:
        pane = app.query_one(LogsPane)
        pane.start_follow(str(logs["base"]), this_run=True)
        await wait_for(pilot, lambda: pane.matches >= 2)
        assert pane.analyzer.store.summary()["accept_len"]["last"] == 2.0
        assert "(base's log)" in pane.status_text().plain

        new = profile("spec3", logs["spec3"])
        app.ctx.profile = new  # what the picker does (app._profile_picked): the store carries it down
        app.profile = new
        await wait_for(pilot, lambda: pane.path == str(logs["spec3"]) and pane.matches >= 2)
        assert pane.analyzer.store.summary()["accept_len"]["last"] == 3.5
        assert "(spec3's log)" in pane.status_text().plain


async def test_a_typed_path_stays_and_says_it_is_not_the_profiles_log(tmp_path: Path) -> None:
    log = tmp_path / "other.log"
    log.write_text(decode(3, 2.5, 10.0) + "\n")
    remote = LocalRemote()
    remote.name = "box"
    ctx = AppContext(remotes={"box": remote}, selected="box")
    app = SpecdebugApp(ctx, panes=[LogsPane])
    async with app.run_test(size=(160, 30)) as pilot:
        pane = app.query_one(LogsPane)
        pane.start_follow(str(log))
        await wait_for(pilot, lambda: pane.matches >= 1)
        new = profile("spec3", tmp_path / "spec3.log")
        app.ctx.profile = new
        app.profile = new
        await wait_for(pilot, lambda: "not spec3's log" in pane.status_text().plain)
        assert pane.path == str(log)
