"""The profile picker (P): every profile of the start-up profile's folder, loaded, one chosen.

A profile whose [deployment] names nodes this app holds no connection to is refused: the panes would
act on part of a server.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specdebug.core.profiles import ProfileError, load_profile
from specdebug.tui.screens.profiles import ProfileChoice, ProfilePicker

if TYPE_CHECKING:
    from specdebug.tui.app import SpecdebugApp


def pick_profile(app: SpecdebugApp) -> None:
    """Offer the profiles to choose from (the Bisect pane's ends marked)."""
    loader = app.ctx.profile_loader or load_profile
    choices = []
    for path in app.ctx.profile_choices:  # loaded, so the list shows names and what does not load
        try:
            p = loader(path)
            choices.append(ProfileChoice(path, p.name, getattr(p, "description", "") or ""))
        except (ProfileError, OSError, ValueError) as exc:
            choices.append(ProfileChoice(path, path.stem, error=str(exc).splitlines()[0]))
    if not choices:
        app.notify(
            "no profiles to choose from: start with -c PROFILE (its folder is offered)",
            severity="warning",
        )
        return
    current = app.ctx.profile_path
    ends = getattr(app.active_pane(), "end_marker", lambda: None)()  # the Bisect pane: g/b mark ends
    app.push_screen(ProfilePicker(choices, current, ends=ends), lambda path: profile_picked(app, path))


def profile_picked(app: SpecdebugApp, path: Path | None) -> None:
    """Load the chosen profile and put it in the store (every pane's profile_changed runs)."""
    if path is None:
        return
    loader = app.ctx.profile_loader or load_profile
    try:
        profile = loader(path)
    except (ProfileError, OSError, ValueError) as exc:
        app.notify(f"{path.name}: {exc}", severity="error")
        return
    missing = [
        h for h in (profile.deployment.nodes if profile.deployment else []) if h not in app.ctx.remotes
    ]
    if missing:  # the panes would act on one box for a server that spans several: refuse
        app.notify(
            f"{profile.name}: its [deployment] nodes {', '.join(missing)} are not connected here; "
            f"open it with `specdebug -c {path}`",
            severity="error",
        )
        return
    app.ctx.profile, app.ctx.profile_path = profile, path
    app.profile = profile  # every pane's profile_changed runs (bound reactives)
    app.notify(f"profile: {profile.name}")
