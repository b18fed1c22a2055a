"""The TUI renders the error root once (issue 38): a pane action or a pane's worker that raises a
SpecdebugError shows one notification with what failed, the message and the hint; the pane has no
catch tuple of its own (the Bisect pane had `(ProfileError, OSError, GroupError, GateError,
ValueError)` and `(TrialError, RemoteError)`, and no hint was ever shown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import DataTable

from specdebug.core.bisect.trial import TrialError
from specdebug.tui.panes.bisect import BisectPane
from tests.tui.pilotwait import toasts_with_severity, until
from tests.tui.test_bisect_pane import make_app


def said(app: Any) -> list[tuple[str, str]]:
    return toasts_with_severity(app)


async def test_a_profile_that_does_not_load_is_one_toast_with_its_hint(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    broken = tmp_path / "profiles" / "fast.toml"
    broken.write_text('name = "fast"\n[server]\nargv = []\n')  # argv may not be empty
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        app.query_one("#bisect-ends", DataTable).focus()
        await pilot.press("g", "down", "b", "a")
        assert await until(pilot, lambda: any("start failed" in m for m, _ in said(app)))
        (message, severity), *_ = [(m, s) for m, s in said(app) if "start failed" in m]
        assert severity == "error" and "fast.toml" in message
        assert f"\nhint: specdebug profile check {broken} lists every problem" in message
        assert pane.engine is None and app.is_running


class FailingEngine:
    """A bisection whose first trial finds the port held by another user's server."""

    class settings:  # noqa: N801 - stands for the engine's BenchSettings
        @staticmethod
        def key() -> str:
            return "requests=2"

    current = None

    async def events(self):  # type: ignore[no-untyped-def]
        raise TrialError(
            "trial 1: port 31000 is in use by another user's process", "give the profiles another --port"
        )
        yield  # an async generator


async def test_a_failed_worker_is_one_toast_with_its_hint(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("specdebug.tui.panes.bisect.Bisection", lambda *a, **kw: FailingEngine())
    app = make_app(tmp_path)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        app.query_one("#bisect-ends", DataTable).focus()
        await pilot.press("g", "down", "b", "a")
        assert await until(pilot, lambda: any("bisection failed" in m for m, _ in said(app)))
        failed = [(m, s) for m, s in said(app) if "bisection failed" in m]
        assert failed == [
            (
                "bisection failed: trial 1: port 31000 is in use by another user's process\n"
                "hint: give the profiles another --port",
                "error",
            )
        ]
        assert await until(pilot, lambda: pane.engine is None) and app.is_running
