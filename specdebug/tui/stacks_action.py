"""One way for a pane to show the workers' stacks: take them (core.stacks) and open StacksScreen.

Kept out of the panes so the Startup and Env panes each add a binding and two lines.
"""

from __future__ import annotations

from textual.app import App

from specdebug.core.profiles import Profile
from specdebug.core.stacks import collect
from specdebug.core.stacks.group import dump_lines
from specdebug.remote.api import Remote, RemoteError
from specdebug.tui.screens.stacks import StacksScreen


async def open_stacks(
    app: App[object], remote: Remote, profile: Profile, pids: list[int] | None = None
) -> None:
    """py-spy every worker of the profile's server (or `pids`), grouped, in a modal; errors notify."""
    app.notify(f"reading the workers' stacks of {profile.name} (py-spy on the box)…", markup=False)
    try:
        d = await collect.dump(remote, profile, pids=pids)
    except (RemoteError, TimeoutError) as exc:
        app.notify(f"stacks: {exc or 'timed out'}", severity="error", markup=False)
        return
    if "error" in d:
        app.notify(f"stacks: {d['error']}: {d['hint']}", severity="error", markup=False, timeout=10)
        return
    await app.push_screen(StacksScreen(f"stacks of {profile.name}: {d['summary']}", dump_lines(d)))
