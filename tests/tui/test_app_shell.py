"""The whole app with every pane: tabs, help, palette and read-only mode never crash it."""

from __future__ import annotations

from textual.widgets import TabbedContent

from specdebug.tui.app import SpecdebugApp, load_panes
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.screens.help import HelpScreen
from tests.tui.fakes import StillRemote


def test_every_binding_has_an_id_and_mutating_actions_exist():
    for cls in load_panes():
        for b in cls.BINDINGS:
            assert getattr(b, "id", None), f"{cls.__name__} binding {b} has no id"
        for action in cls.MUTATING_ACTIONS:
            assert hasattr(cls, f"action_{action}"), f"{cls.__name__}.{action}"
    for b in SpecdebugApp.BINDINGS:
        assert b.id


async def test_tabs_help_and_palette():
    app = SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, selected="box"))
    async with app.run_test(size=(140, 45)) as pilot:
        tabs = app.query_one(TabbedContent)
        for i, cls in enumerate(app.pane_classes, start=1):
            await pilot.press(str(i))
            await pilot.pause()
            assert tabs.active == f"tab-{cls.PANE_ID}"
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press("escape")
        assert app.is_running


async def test_readonly_disables_mutating_actions():
    app = SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, readonly=True))
    async with app.run_test(size=(140, 45)):
        for pane in app.query(Pane):
            for action in pane.MUTATING_ACTIONS:
                assert pane.check_action(action, ()) is False


async def test_profile_picker_switches_every_pane(tmp_path):
    from pathlib import Path

    from specdebug.core.profiles import load_profile
    from specdebug.tui.screens.profiles import ProfilePicker

    examples = Path(__file__).resolve().parents[2] / "examples"
    choices = sorted(examples.glob("*.toml"))
    ctx = AppContext(
        remotes={"box": StillRemote("box")},
        profile=load_profile(examples / "baseline.toml"),
        profile_path=examples / "baseline.toml",
        profile_choices=choices,
    )
    app = SpecdebugApp(ctx)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.press("P")
        await pilot.pause()
        assert isinstance(app.screen, ProfilePicker)
        target = next(i for i, p in enumerate(choices) if p.stem == "eagle3-3step")
        for _ in range(target):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert ctx.profile.name == "eagle3-3step" and ctx.profile_path.stem == "eagle3-3step"
        assert "eagle3-3step" in str(app.query_one("#status-line").render())


def test_s_has_one_meaning_and_x_stops_in_every_pane():
    """`s` was Stop, Set baseline and Skip in three panes (issue 26): one meaning per key now for
    what stops or marks; x is what stops a pane's work wherever it has some."""
    meanings: dict[str, set[str]] = {}
    for cls in load_panes():
        for b in cls.BINDINGS:
            for key in b.key.split(","):
                meanings.setdefault(key, set()).add(b.description)
    assert meanings["s"] == {"Skip"}
    stops = {
        (cls.PANE_ID, b.key)
        for cls in load_panes()
        for b in cls.BINDINGS
        if b.description in ("Stop", "Cancel", "Abort")
    }
    assert {key for _, key in stops} == {"x"}, stops


async def test_palette_entries_show_their_keys():
    from specdebug.tui.palette import ActionsProvider

    app = SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, selected="box"))
    async with app.run_test(size=(140, 45)):
        texts = [text for text, _b, _n in ActionsProvider(app.screen)._entries()]
        assert "Logs: Filter  (/)" in texts
        assert "Bench: Set baseline  (=)" in texts
        assert "Startup: Stop  (x)" in texts


async def test_profile_picker_shows_names_marks_invalid_and_current(tmp_path):
    """The picker lists profile names (not file stems), marks a file that does not load, and the
    current profile (issue 26)."""
    from specdebug.core.profiles import load_profile
    from specdebug.tui.screens.profiles import ProfilePicker

    good = tmp_path / "a.toml"
    good.write_text('name = "baseline-h200"\ndescription = "the reference"\n[server]\nargv = ["true"]\n')
    other = tmp_path / "b.toml"
    other.write_text('name = "eagle-2step"\n[server]\nargv = ["true"]\n')
    broken = tmp_path / "c.toml"
    broken.write_text('name = "x"\n[server]\nargv = "not a list"\n')
    ctx = AppContext(
        remotes={"box": StillRemote("box")},
        profile=load_profile(good),
        profile_path=good,
        profile_choices=[good, other, broken],
    )
    app = SpecdebugApp(ctx)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.press("P")
        await pilot.pause()
        assert isinstance(app.screen, ProfilePicker)
        labels = [c for c in app.screen.choices]
        texts = [app.screen._label(c).plain for c in labels]
        assert texts[0].startswith("baseline-h200 (current)  a.toml") and "the reference" in texts[0]
        assert texts[1].startswith("eagle-2step  b.toml")
        assert "INVALID" in texts[2] and "argv" in texts[2]
