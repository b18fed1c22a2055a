"""The profile picker opened from the Bisect pane marks the ends: g good, b bad (tagged in the list);
enter and esc as anywhere; elsewhere g/b do nothing in the picker.  Marking sets only the pane's
ends (nothing on the box), so a read-only seat may mark too; starting stays refused there."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import OptionList

from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.bench import BenchPane
from specdebug.tui.panes.bisect import BisectPane
from specdebug.tui.screens.profiles import ProfilePicker
from tests.tui.fakes import StillRemote


def make_app(tmp_path: Path, *, readonly: bool = False, panes=None) -> SpecdebugApp:
    folder = tmp_path / "profiles"
    folder.mkdir(exist_ok=True)
    for name in ("fast", "middle", "slow"):
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\ndescription = "the {name} one"\n[server]\nargv = ["python3", "--port", "31000"]\n'
        )
    ctx = AppContext(
        remotes={"gpubox": StillRemote("gpubox")},
        selected="gpubox",
        readonly=readonly,
        profile_choices=sorted(folder.glob("*.toml")),  # fast, middle, slow
    )
    return SpecdebugApp(ctx, panes=panes or [BisectPane])


def labels(app: SpecdebugApp) -> list[str]:
    options = app.screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def open_picker(app: SpecdebugApp, pilot) -> ProfilePicker:
    await pilot.press("P")
    await pilot.pause()
    assert isinstance(app.screen, ProfilePicker)
    return app.screen


async def test_g_and_b_in_the_picker_mark_the_ends_and_tag_them(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        await open_picker(app, pilot)
        assert "g marks the bisection's good end" in str(app.screen.query_one("Static").render())
        await pilot.press("g", "down", "down", "b")  # fast good, slow bad
        assert pane.good.stem == "fast" and pane.bad.stem == "slow"
        assert labels(app) == [
            "fast  [good]  the fast one",
            "middle  the middle one",
            "slow  [bad]  the slow one",
        ]
        await pilot.press("up", "b")  # middle becomes the bad end: slow loses its tag
        assert pane.bad.stem == "middle" and labels(app)[1:] == [
            "middle  [bad]  the middle one",
            "slow  the slow one",
        ]
        await pilot.press("up", "b")  # fast was good, now bad: one tag per profile, good cleared
        assert pane.bad.stem == "fast" and pane.good is None and labels(app)[0] == "fast  [bad]  the fast one"
        await pilot.press("g")
        assert pane.good.stem == "fast" and pane.bad is None
        await pilot.press("down", "b", "escape")  # esc closes as today: the ends stay, the profile too
        await pilot.pause()
        assert not isinstance(app.screen, ProfilePicker)
        assert pane.good.stem == "fast" and pane.bad.stem == "middle" and app.ctx.profile is None
        ends = app.query_one("#bisect-ends")
        assert [str(ends.get_row(str(p))[0]) for p in pane.choices()] == ["GOOD", "BAD", ""]


async def test_enter_still_picks_the_profile_for_every_pane(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(150, 30)) as pilot:
        await open_picker(app, pilot)
        await pilot.press("b", "down", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, ProfilePicker)
        assert app.ctx.profile.name == "middle" and app.query_one(BisectPane).bad.stem == "fast"


async def test_readonly_seat_may_mark_but_not_start(tmp_path: Path) -> None:
    app = make_app(tmp_path, readonly=True)
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BisectPane)
        await open_picker(app, pilot)
        await pilot.press("g", "down", "b", "escape")
        await pilot.pause()
        assert pane.good.stem == "fast" and pane.bad.stem == "middle"  # pane state only
        await pilot.press("a")
        assert pane.engine is None and pane.check_action("start", ()) is False


async def test_outside_the_bisect_pane_g_and_b_do_nothing(tmp_path: Path) -> None:
    app = make_app(tmp_path, panes=[BenchPane, BisectPane])  # the Bench pane is shown first
    async with app.run_test(size=(150, 30)) as pilot:
        picker = await open_picker(app, pilot)
        assert picker.ends is None and picker.check_action("mark", ("good",)) is False
        await pilot.press("g", "b")
        pane = app.query_one(BisectPane)
        assert pane.good is None and pane.bad is None and labels(app)[0] == "fast  the fast one"
        assert isinstance(app.screen, ProfilePicker)  # still open: esc closes it
        await pilot.press("escape")


def test_picker_bindings_have_ids() -> None:
    ids = {b.id for b in ProfilePicker.BINDINGS}  # type: ignore[union-attr]
    assert ids == {"profiles.close", "profiles.good", "profiles.bad"}
