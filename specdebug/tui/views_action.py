"""The drift snapshot and the session report, opened from the panes (and so from the palette).

Each runs the same core call as its verb (`specdebug drift`: core.drift.snapshot.take_snapshot and
core.drift.describe; `specdebug report`: core.report.session_markdown) and shows its lines in
TextScreen; a failure is one notification, as for the stacks (tui.stacks_action).
"""

from __future__ import annotations

from textual.app import App

from specdebug.core.drift.describe import describe
from specdebug.core.drift.snapshot import take_snapshot
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.report import session_markdown
from specdebug.remote.api import Remote, RemoteError
from specdebug.tui.screens.text import TextScreen

CONNECT_WAIT_S = 30.0


async def open_drift(app: App[object], remote: Remote, profile: Profile) -> None:
    """Take the box's drift snapshot as the profile's server sees it, and show it."""
    app.notify(f"taking the drift snapshot of {remote.name} for {profile.name}…", markup=False)
    try:
        await remote.wait_connected(CONNECT_WAIT_S)
        snap = await take_snapshot(remote, profile)
    except (RemoteError, TimeoutError) as exc:
        app.notify(f"drift: {exc or 'timed out'}", severity="error", markup=False)
        return
    await app.push_screen(
        TextScreen(
            f"drift of {remote.name} as {profile.name}'s server sees it",
            describe(snap),
            f"the same as `specdebug drift {remote.name} -c {profile.name}` (--json for all of it)",
        )
    )


async def open_report(app: App[object], journal: EventJournal, label: str, *, include_failed: bool) -> None:
    """The session's markdown report, as `specdebug report` prints it."""
    text = session_markdown(journal.records(), label, include_failed=include_failed)
    await app.push_screen(
        TextScreen(
            f"report of {label}",
            text.splitlines(),
            "the same as `specdebug report --session "
            f"{label}`" + (" --include-failed" if include_failed else "") + " (-o FILE writes it)",
        )
    )
