"""`drift` and `report` are in the command palette (issue 41): each entry runs the verb's own core call
and shows what the verb prints.  The report reads a session journal of the test's own; the drift
snapshot is taken on this machine as the box (`local:`), under the profile's interpreter."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from specdebug.cli import main
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile_text
from specdebug.core.records import BenchResultRecord
from specdebug.remote.factory import ConnectOptions, connect_host
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.palette import ActionsProvider
from specdebug.tui.screens.text import TextScreen
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import until
from tests.unit.test_bench_report import result


def _entry(app: SpecdebugApp, starts: str):  # type: ignore[no-untyped-def]
    """The palette's entry whose text starts with `starts` (None: not in the palette)."""
    return next(((b, n) for t, b, n in ActionsProvider(app.screen)._entries() if t.startswith(starts)), None)


def _shown(app: SpecdebugApp) -> list[str]:
    return app.screen.lines if isinstance(app.screen, TextScreen) else []


async def test_the_report_entry_shows_what_the_report_verb_prints(tmp_path: Path, capsys) -> None:
    session = tmp_path / "session"
    journal = Journal(session)
    journal.append(
        BenchResultRecord(result=result("baseline", 89.1, "2", {}).model_copy(update={"host": "box"}))
    )
    journal.append(
        BenchResultRecord(result=result("eagle3", 93.9, "3", {}).model_copy(update={"host": "box"}))
    )
    assert await asyncio.to_thread(main, ["report", "--session", str(session)]) == 0  # its own loop
    printed = capsys.readouterr().out.splitlines()
    app = SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, selected="box", journal=journal))
    async with app.run_test(size=(140, 45)) as pilot:
        found = _entry(app, "Bench: Session report")
        assert found is not None, "no report entry in the palette"
        await ActionsProvider(app.screen)._run(found[1], found[0])
        assert await until(pilot, lambda: bool(_shown(app)), 20), "the report did not open"
        assert _shown(app) == printed
        assert "| 2 |" in "\n".join(_shown(app))  # both results, as the verb's table has them


async def test_the_drift_entry_shows_what_the_drift_verb_prints(tmp_path: Path) -> None:
    profile = load_profile_text(
        f'name = "drift-tui"\n[server]\nargv = ["{sys.executable}", "-c", "pass"]\nport = 31999\nkind = "custom"\n'
        f'log_file = "{tmp_path / "d.log"}"\n',
        tmp_path / "drift-tui.toml",
    )
    remote = connect_host("local:", ConnectOptions())
    app = SpecdebugApp(
        AppContext(remotes={"local": remote}, selected="local", profile=profile), owns_remotes=True
    )
    async with app.run_test(size=(140, 45)) as pilot:
        found = _entry(app, "Env: Drift snapshot")
        assert found is not None, "no drift entry in the palette"
        await ActionsProvider(app.screen)._run(found[1], found[0])
        assert await until(pilot, lambda: bool(_shown(app)), 90), "the drift snapshot did not open"
        lines = _shown(app)
        assert lines[0].startswith(f"interpreter {sys.executable}")  # the profile's own interpreter
        assert any(line.startswith("installed files: ") for line in lines)
        assert lines[-1].startswith("(snapshot took ")  # core.drift.describe's lines, as the verb's
